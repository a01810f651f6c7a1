// host_collectives.cpp - see host_collectives.hpp.
#include "host_collectives.hpp"

#include "profile_registry.hpp"

namespace nova::detail {

CollectiveSchedule::CollectiveSchedule(const ExecutableDesc& desc) {
  if (desc.collectives.empty()) return;
  const std::size_t ends = desc.launches.size() + 1;
  started_after.resize(ends);
  waited_before.resize(ends);
  for (std::size_t c = 0; c < desc.collectives.size(); ++c) {
    const CollectiveDesc& col = desc.collectives[c];
    // (ExecutableDesc::validate keeps both within the plan.)
    started_after.at(col.after_launch).push_back(c);
    waited_before.at(col.before_launch).push_back(c);
  }
}

HostCollectives::HostCollectives(const ExecutableDesc& desc, const CollectiveSchedule& schedule,
                                 dist::Communicator& comm, Address address, RunTimeline* timeline,
                                 AroundWait around_wait)
    : desc_(desc), schedule_(schedule), comm_(comm), address_(std::move(address)), timeline_(timeline),
      around_wait_(std::move(around_wait)), pending_(desc.collectives.size()) {}

void HostCollectives::at(std::size_t i) {
  if (schedule_.empty()) return;
  for (std::size_t c : schedule_.started_after[i]) {
    const CollectiveDesc& col = desc_.collectives[c];
    if (timeline_) timeline_->collectives[c].start_s = clock_s();
    std::vector<dist::Communicator::Buffer> bucket;
    for (const BufferRef& b : col.buffers) bucket.push_back({address_(b), b.bytes / size_of(col.dtype)});
    pending_[c] = comm_.start_bucket_sum(bucket, col.dtype);
    if (timeline_) timeline_->collectives[c].start_end_s = clock_s();
  }
  for (std::size_t c : schedule_.waited_before[i]) {
    if (timeline_) timeline_->collectives[c].wait_begin_s = clock_s();
    if (around_wait_) around_wait_(true);
    try {
      for (dist::Communicator::Handle h : pending_[c]) comm_.wait(h);
    } catch (...) {
      if (around_wait_) around_wait_(false);
      throw;
    }
    if (around_wait_) around_wait_(false);
    if (timeline_) timeline_->collectives[c].wait_end_s = clock_s();
  }
}

} // namespace nova::detail
