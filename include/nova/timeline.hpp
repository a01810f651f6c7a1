// timeline.hpp - when each launch and each data-parallel collective of a
// compiled step ran: to see how much of the gradients' communication the
// backward hides.
//
// With NOVA_TIMELINE=<file> (or nova::set_timeline(true) in code) the
// runtime reads the clock around every launch, at each collective's start
// and around each wait, keeping the last run of the process. At exit,
// NOVA_TIMELINE=<file> writes it as a Chrome trace (chrome://tracing,
// Perfetto): kernels on one row, each bucket's sum in flight on another,
// the time a wait blocked on a third; rank r > 0 of a data-parallel group
// writes <file>.rank<r>.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nova {

struct LaunchTiming {
  std::uint32_t kernel = 0; // into RunTimeline::kernel_names
  double begin_s = 0, end_s = 0;
};

/// One collective (a bucket) of the plan, as it ran.
struct CollectiveTiming {
  std::uint64_t bytes = 0;                // all its buffers
  std::vector<std::uint64_t> buffer_bytes; // each (one sum each)
  std::uint32_t after_launch = 0, before_launch = 0;
  double start_s = 0;      // started (right after launch after_launch - 1)
  double start_end_s = 0;  // the start returned (packing, MPI's first round)
  double wait_begin_s = 0; // its wait was called (before launch before_launch)
  double wait_end_s = 0;   // and returned: the sums are there
};

struct RunTimeline {
  int rank = -1; // the data-parallel rank, -1 without a group
  double begin_s = 0, end_s = 0; // seconds on one process-wide clock
  std::vector<std::string> kernel_names;
  std::vector<LaunchTiming> launches;
  std::vector<CollectiveTiming> collectives;
};

/// Records timelines from now on (true) or stops (false).
void set_timeline(bool on);
/// True when recording: NOVA_TIMELINE set, or set_timeline(true).
bool timeline_enabled();
/// The last run recorded in this process (no launches if none).
RunTimeline last_timeline();
/// `t` as Chrome trace JSON.
std::string timeline_json(const RunTimeline& t);

} // namespace nova
