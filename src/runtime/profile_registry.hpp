// profile_registry.hpp - the counters behind nova/profile.hpp. Private to the
// runtime: cpu_executable.cpp registers each executable it loads when
// profiling is on and adds each launch's time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "nova/executable_desc.hpp"
#include "nova/timeline.hpp"

namespace nova::detail {

struct ExecutableProfile {
  explicit ExecutableProfile(const ExecutableDesc& d)
      : desc(d), kernel_ns(d.kernels.size()), kernel_launches(d.kernels.size()) {}
  ExecutableDesc desc; // a copy without the object code
  std::vector<std::atomic<std::uint64_t>> kernel_ns, kernel_launches;
  std::atomic<std::uint64_t> runs{0}, run_ns{0};
};

/// A new profile, kept (and printed at exit) for the life of the process.
ExecutableProfile* register_profile(const ExecutableDesc& desc);

/// Seconds on one process-wide steady clock (timeline.cpp).
double clock_s();
/// Keeps `t` as the process's last run (nova::last_timeline).
void publish_timeline(RunTimeline t);
/// A timeline of a run of `desc` beginning at `begin_s`: the rank, the
/// kernels' names and, per collective, what its plan says (its launches,
/// its buffers' bytes); the executable adds the times.
RunTimeline timeline_of(const ExecutableDesc& desc, int rank, double begin_s);

} // namespace nova::detail
