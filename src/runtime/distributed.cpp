// distributed.cpp - the communicator interface's environment and the
// in-process (loopback) group. See nova/distributed.hpp.
//
// The loopback group keeps, per collective (numbered in the order each rank
// starts them), every rank's buffer. The last rank to start one sums the
// buffers in rank order and writes the sum into all of them; waits block on
// a condition variable until then, or until a disagreement is found, or
// until the timeout, whichever comes first. Nothing waits without a bound.

#include "nova/distributed.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

namespace nova::dist {

double timeout_from_env() {
  const char* v = std::getenv("NOVA_DIST_TIMEOUT_S");
  if (!v || !*v) return 300.0;
  char* end = nullptr;
  double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0))
    throw DistError(std::string("nova: NOVA_DIST_TIMEOUT_S='") + v + "' is not a positive number of seconds");
  return s;
}

namespace {
thread_local std::shared_ptr<Communicator> current_communicator;
} // namespace

void set_communicator(std::shared_ptr<Communicator> communicator) { current_communicator = std::move(communicator); }
std::shared_ptr<Communicator> communicator() { return current_communicator; }

namespace {

std::string describe(std::size_t count, DType dtype) {
  return std::to_string(count) + " x " + std::string(name_of(dtype));
}

/// One collective of the group, as the ranks start it.
struct Collective {
  std::size_t count = 0;
  DType dtype = DType::f32;
  int first_rank = -1; // the rank whose start described it
  std::vector<void*> buffers; // per rank; null until that rank starts it
  int arrived = 0, waited = 0;
  bool done = false;
  std::string error; // a disagreement, reported to every waiter
};

struct Group {
  int size = 0;
  double timeout_s = 0;
  LoopbackFaults faults;
  std::string broken; // why the group failed; then nothing more runs on it
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::uint64_t, Collective> ops;
};

template <class T> void sum_into_all(Collective& op) {
  std::vector<T> sum(static_cast<const T*>(op.buffers[0]), static_cast<const T*>(op.buffers[0]) + op.count);
  for (std::size_t r = 1; r < op.buffers.size(); ++r) {
    const T* b = static_cast<const T*>(op.buffers[r]);
    for (std::size_t i = 0; i < op.count; ++i) sum[i] += b[i];
  }
  for (void* b : op.buffers) std::memcpy(b, sum.data(), op.count * sizeof(T));
}

class Loopback final : public Communicator {
 public:
  Loopback(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size; }

  Handle start_all_reduce_sum(void* data, std::size_t count, DType dtype) override {
    if (rank_ == group_->faults.absent_rank)
      throw DistError("nova: rank " + std::to_string(rank_) + " is absent (an injected fault)");
    if (dtype != DType::f32 && dtype != DType::f64)
      throw DistError("nova: all-reduce of " + describe(count, dtype) + ": only f32 and f64 are summed");
    Handle h = next_++;
    std::lock_guard lock(group_->mutex);
    if (!group_->broken.empty()) throw DistError(group_->broken);
    Collective& op = group_->ops[h];
    if (op.first_rank < 0) {
      op.count = count;
      op.dtype = dtype;
      op.first_rank = rank_;
      op.buffers.assign(static_cast<std::size_t>(group_->size), nullptr);
    } else if (op.count != count || op.dtype != dtype) {
      op.error = "nova: all-reduce #" + std::to_string(h) + ": rank " + std::to_string(op.first_rank) + " sums " +
                 describe(op.count, op.dtype) + ", rank " + std::to_string(rank_) + " " + describe(count, dtype) +
                 " (the ranks run different steps)";
      group_->changed.notify_all();
      return h;
    }
    op.buffers[static_cast<std::size_t>(rank_)] = data;
    if (++op.arrived == group_->size && op.error.empty()) {
      if (dtype == DType::f32)
        sum_into_all<float>(op);
      else
        sum_into_all<double>(op);
      op.done = true;
      group_->changed.notify_all();
    }
    return h;
  }

  void wait(Handle h) override {
    std::unique_lock lock(group_->mutex);
    auto it = group_->ops.find(h);
    if (it == group_->ops.end() || it->second.buffers.empty() ||
        (it->second.buffers[static_cast<std::size_t>(rank_)] == nullptr && it->second.error.empty()))
      throw DistError("nova: rank " + std::to_string(rank_) + " waits for all-reduce #" + std::to_string(h) +
                      ", which it never started");
    Collective& op = it->second;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(group_->timeout_s);
    bool settled = group_->changed.wait_until(lock, deadline, [&] { return op.done || !op.error.empty(); });
    if (!op.error.empty()) throw DistError(op.error);
    if (!settled) {
      std::ostringstream missing;
      for (int r = 0; r < group_->size; ++r)
        if (!op.buffers[static_cast<std::size_t>(r)]) missing << (missing.tellp() > 0 ? ", " : "") << r;
      std::ostringstream msg;
      msg << "nova: all-reduce #" << h << " (" << describe(op.count, op.dtype) << ") on rank " << rank_ << " of "
          << group_->size << ": rank" << (op.arrived + 1 < group_->size ? "s " : " ") << missing.str()
          << " did not take part within " << group_->timeout_s << " s (NOVA_DIST_TIMEOUT_S)";
      // The group is done: the other waiters fail now with this message,
      // and a late peer finds it broken instead of writing into buffers
      // whose owners gave up.
      op.error = msg.str();
      group_->broken = "nova: the data-parallel group failed earlier: " + msg.str();
      group_->changed.notify_all();
      throw DistError(msg.str());
    }
    if (++op.waited == group_->size) group_->ops.erase(it);
  }

 private:
  std::shared_ptr<Group> group_;
  int rank_;
  Handle next_ = 0;
};

} // namespace

std::vector<std::shared_ptr<Communicator>> loopback_group(int size, double timeout_s, LoopbackFaults faults) {
  if (size < 1) throw DistError("nova: a loopback group needs at least one rank, not " + std::to_string(size));
  auto group = std::make_shared<Group>();
  group->size = size;
  group->timeout_s = timeout_s < 0 ? timeout_from_env() : timeout_s;
  group->faults = faults;
  std::vector<std::shared_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_shared<Loopback>(group, r));
  return ranks;
}

} // namespace nova::dist
