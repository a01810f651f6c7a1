// distributed.cpp - the communicator interface's environment and the
// in-process (loopback) group. See nova/distributed.hpp.
//
// The loopback group keeps, per collective (numbered in the order each rank
// starts them), every rank's buffer. The last rank to start one sums the
// buffers in rank order and writes the sum into all of them; waits block on
// a condition variable until then, or until a disagreement is found, or
// until the timeout, whichever comes first. Nothing waits without a bound.

#include "nova/distributed.hpp"
#include "nova/executable_desc.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
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

std::shared_ptr<Communicator> required_communicator(std::size_t collectives) {
  if (!current_communicator)
    throw DistError("nova: this step sums " + std::to_string(collectives) +
                    " buffer groups across data-parallel ranks, but the calling thread has no communicator "
                    "(nova::dist::set_communicator)");
  return current_communicator;
}

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

/// One broadcast of the group, numbered in the order each rank calls it.
struct Broadcast {
  int root = -1;
  bool set = false;
  std::vector<std::uint8_t> bytes;
  int arrived = 0;
};

struct Group {
  int size = 0;
  double timeout_s = 0;
  LoopbackFaults faults;
  std::string broken; // why the group failed; then nothing more runs on it
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::uint64_t, Collective> ops;
  std::map<std::uint64_t, Broadcast> broadcasts;
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

  void broadcast(std::vector<std::uint8_t>& bytes, int root) override {
    if (rank_ == group_->faults.absent_rank)
      throw DistError("nova: rank " + std::to_string(rank_) + " is absent (an injected fault)");
    if (root < 0 || root >= group_->size)
      throw DistError("nova: broadcast from rank " + std::to_string(root) + " in a group of " +
                      std::to_string(group_->size));
    std::uint64_t n = next_broadcast_++;
    std::unique_lock lock(group_->mutex);
    if (!group_->broken.empty()) throw DistError(group_->broken);
    Broadcast& b = group_->broadcasts[n];
    if (b.root < 0) b.root = root;
    if (b.root != root) {
      group_->broken = "nova: broadcast #" + std::to_string(n) + ": rank " + std::to_string(rank_) +
                       " expects it from rank " + std::to_string(root) + ", another rank from rank " +
                       std::to_string(b.root) + " (the ranks run different programs)";
      group_->changed.notify_all();
      throw DistError(group_->broken);
    }
    if (rank_ == root) {
      b.bytes = bytes;
      b.set = true;
      group_->changed.notify_all();
    } else {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(group_->timeout_s);
      bool settled = group_->changed.wait_until(lock, deadline, [&] { return b.set || !group_->broken.empty(); });
      if (!group_->broken.empty()) throw DistError(group_->broken);
      if (!settled) {
        std::ostringstream msg;
        msg << "nova: broadcast #" << n << " on rank " << rank_ << " of " << group_->size << ": rank " << root
            << " did not send within " << group_->timeout_s << " s (NOVA_DIST_TIMEOUT_S)";
        group_->broken = "nova: the data-parallel group failed earlier: " + msg.str();
        group_->changed.notify_all();
        throw DistError(msg.str());
      }
      bytes = b.bytes;
    }
    if (++b.arrived == group_->size) group_->broadcasts.erase(n);
  }

 private:
  std::shared_ptr<Group> group_;
  int rank_;
  Handle next_ = 0;
  std::uint64_t next_broadcast_ = 0;
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

namespace {

std::string hex_key(const std::array<std::uint64_t, 2>& key) {
  char text[40];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(key[0]),
                static_cast<unsigned long long>(key[1]));
  return text;
}

// What rank 0 sends: a tag, its stable key, then its compiler build and
// the description (tag 0), nothing (1: not shareable, each rank compiles),
// or why its compile failed (2).
enum : std::uint8_t { kDescription = 0, kCompileEach = 1, kCompileFailed = 2 };

void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::uint64_t get_u64(const std::vector<std::uint8_t>& in, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(in[at + static_cast<std::size_t>(i)]) << (8 * i);
  return v;
}

} // namespace

std::shared_ptr<Executable> agree_on_executable(Communicator& comm, std::array<std::uint64_t, 2> stable_key,
                                                const std::string& build,
                                                const std::function<std::shared_ptr<Executable>()>& compile,
                                                const std::string& where) {
  std::vector<std::uint8_t> message;
  std::shared_ptr<Executable> exe;
  if (comm.rank() == 0) {
    std::uint8_t tag = kCompileEach;
    std::string failure;
    std::exception_ptr failed;
    std::vector<std::uint8_t> body;
    try {
      exe = compile();
      if (const ExecutableDesc* desc = exe->shareable() ? exe->description() : nullptr) {
        tag = kDescription;
        put_u64(body, build.size());
        body.insert(body.end(), build.begin(), build.end());
        std::vector<std::uint8_t> bytes = desc->serialize();
        body.insert(body.end(), bytes.begin(), bytes.end());
      }
    } catch (const std::exception& e) {
      tag = kCompileFailed;
      failed = std::current_exception();
      failure = e.what();
      body.assign(failure.begin(), failure.end());
    }
    message.push_back(tag);
    put_u64(message, stable_key[0]);
    put_u64(message, stable_key[1]);
    message.insert(message.end(), body.begin(), body.end());
    comm.broadcast(message, 0);
    if (failed) std::rethrow_exception(failed); // after the others know
  } else {
    comm.broadcast(message, 0);
  }
  if (message.size() < 17) throw DistError("nova: rank 0 sent a malformed step (" + std::to_string(message.size()) + " bytes)");
  std::uint8_t tag = message[0];
  std::array<std::uint64_t, 2> theirs{get_u64(message, 1), get_u64(message, 9)};
  if (tag == kCompileFailed && comm.rank() != 0)
    throw DistError("nova: rank 0 could not compile the data-parallel step declared at " + where + ": " +
                    std::string(message.begin() + 17, message.end()));

  // Every rank says whether its step is rank 0's; all fail together if not.
  std::string mismatch;
  if (theirs != stable_key)
    mismatch = "rank " + std::to_string(comm.rank()) + " runs a step with key " + hex_key(stable_key) +
               ", rank 0 one with key " + hex_key(theirs) + " (another shape, or another build)";
  std::string version;
  if (mismatch.empty() && tag == kDescription && comm.rank() != 0) {
    std::uint64_t n = message.size() >= 25 ? get_u64(message, 17) : ~0ull;
    if (n > message.size() - 25) throw DistError("nova: rank 0 sent a malformed step");
    version.assign(message.begin() + 25, message.begin() + 25 + static_cast<std::ptrdiff_t>(n));
    if (version != build)
      mismatch = "rank " + std::to_string(comm.rank()) + " runs compiler " + build + ", rank 0 " + version +
                 " (another build)";
  }
  std::vector<double> disagree(static_cast<std::size_t>(comm.size()), 0.0);
  disagree[static_cast<std::size_t>(comm.rank())] = mismatch.empty() ? 0.0 : 1.0;
  comm.wait(comm.start_all_reduce_sum(disagree.data(), disagree.size(), DType::f64));
  if (!mismatch.empty())
    throw DistError("nova: the data-parallel step declared at " + where + " differs between ranks: " + mismatch);
  std::string others;
  for (std::size_t r = 0; r < disagree.size(); ++r)
    if (disagree[r] != 0.0) others += (others.empty() ? "" : ", ") + std::to_string(r);
  if (!others.empty())
    throw DistError("nova: the data-parallel step declared at " + where + " (key " + hex_key(stable_key) +
                    " on rank " + std::to_string(comm.rank()) + ") differs on rank(s) " + others +
                    " (another shape, or another build)");

  if (comm.rank() == 0 || tag == kCompileEach) return exe ? exe : compile();
  std::size_t at = 25 + version.size();
  ExecutableDesc desc = ExecutableDesc::deserialize(
      std::span<const std::uint8_t>(message.data() + at, message.size() - at), "the step rank 0 sent");
  return load_or_describe(desc);
}

} // namespace nova::dist
