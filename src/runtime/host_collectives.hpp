// host_collectives.hpp - where a plan's collectives run, launch by launch,
// and their run on host buffers. Private to the runtime (and the GPU
// emulator, which runs a plan on the host as the CPU runtime does).
//
// The plan (nova/executable_desc.hpp) starts collective c once
// `after_launch` launches have run and waits for it before launch
// `before_launch` (launches.size(): before the step returns).
// CollectiveSchedule turns that into, for each launch index, the
// collectives to start and to wait for there, once per loaded plan: the
// CPU runtime, the CUDA runtime (its NCCL all-reduces and events) and the
// emulator walk the same lists. HostCollectives starts the bucket sums
// through the thread's communicator and waits for them, with the
// NOVA_TIMELINE clock around each.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "nova/distributed.hpp"
#include "nova/executable_desc.hpp"
#include "nova/timeline.hpp"

namespace nova::detail {

struct CollectiveSchedule {
  CollectiveSchedule() = default;
  explicit CollectiveSchedule(const ExecutableDesc& desc);
  /// Indexed by launch, launches.size() + 1 entries (none without collectives).
  std::vector<std::vector<std::size_t>> started_after, waited_before;
  bool empty() const { return started_after.empty(); }
};

class HostCollectives {
 public:
  /// Where a buffer of the run is on the host.
  using Address = std::function<void*(const BufferRef&)>;
  /// Called with true before a wait and false after it (also when it
  /// throws): the emulator lets the compiler's lock go meanwhile.
  using AroundWait = std::function<void(bool waiting)>;

  HostCollectives(const ExecutableDesc& desc, const CollectiveSchedule& schedule, dist::Communicator& comm,
                  Address address, RunTimeline* timeline = nullptr, AroundWait around_wait = {});
  /// Starts the sums the schedule starts after `i` launches, then waits
  /// for those it waits for before launch `i`.
  void at(std::size_t i);

 private:
  const ExecutableDesc& desc_;
  const CollectiveSchedule& schedule_;
  dist::Communicator& comm_;
  Address address_;
  RunTimeline* timeline_;
  AroundWait around_wait_;
  std::vector<std::vector<dist::Communicator::Handle>> pending_;
};

} // namespace nova::detail
