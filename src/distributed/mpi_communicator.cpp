// mpi_communicator.cpp - nova/mpi.hpp: the Communicator over MPI.
//
// A started sum is one MPI_Iallreduce (in place, MPI_SUM); a bucket of
// several buffers is packed into one (start_bucket_sum). Its request is kept
// under the handle until wait() sees it complete. Waits and
// broadcasts poll MPI_Test against a deadline (NOVA_DIST_TIMEOUT_S) instead
// of blocking in MPI_Wait, which would hang forever on a peer that never
// comes. Open MPI's reductions give every rank the same bits (each chunk is
// reduced once and then distributed), which the data-parallel tests check.
#include "nova/mpi.hpp"
#include "nova/target.hpp"

// The C API only (Open MPI's mpi.h would pull in its deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace nova::dist {

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

namespace {

/// Set once a collective failed: the peers may be hung, and MPI_Finalize
/// would wait for them forever, so the process ends the job instead.
std::atomic<bool> broken{false};

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  return std::string(text, static_cast<std::size_t>(n));
}

class MpiWorld final : public Communicator {
 public:
  MpiWorld() : timeout_s_(timeout_from_env()) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    // Errors come back as codes (thrown as DistError), not as an abort.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Handle start_all_reduce_sum(void* data, std::size_t count, DType dtype) override {
    if (dtype != DType::f32 && dtype != DType::f64)
      throw DistError("nova: MPI all-reduce of " + std::string(name_of(dtype)) + ": only f32 and f64 are summed");
    if (count > static_cast<std::size_t>(INT32_MAX))
      throw DistError("nova: MPI all-reduce of " + std::to_string(count) + " elements: more than MPI's int count");
    MPI_Request request;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), dtype == DType::f32 ? MPI_FLOAT : MPI_DOUBLE,
                            MPI_SUM, comm_, &request);
    if (rc != MPI_SUCCESS) throw DistError("nova: MPI_Iallreduce failed on rank " + std::to_string(rank_) + ": " + mpi_error(rc));
    Handle h = next_++;
    Pending& p = pending_[h];
    p.request = request;
    p.count = count;
    p.dtype = dtype;
    return h;
  }

  // A bucket is one message: its buffers packed into a staging buffer, one
  // MPI_Iallreduce, unpacked at the wait. Hundreds of small sums would each
  // pay MPI's per-message cost and need progress of their own.
  std::vector<Handle> start_bucket_sum(const std::vector<Buffer>& buffers, DType dtype) override {
    if (buffers.size() < 2) return Communicator::start_bucket_sum(buffers, dtype);
    std::size_t width = size_of(dtype), total = 0;
    for (const Buffer& b : buffers) total += b.count;
    std::vector<std::uint8_t> staging = spare(total * width);
    std::size_t at = 0;
    for (const Buffer& b : buffers) {
      std::memcpy(staging.data() + at, b.data, b.count * width);
      at += b.count * width;
    }
    Handle h = start_all_reduce_sum(staging.data(), total, dtype);
    Pending& p = pending_[h];
    p.staging = std::move(staging); // the vector's heap block does not move
    p.unpack = buffers;
    return {h};
  }

  void wait(Handle h) override {
    auto it = pending_.find(h);
    if (it == pending_.end())
      throw DistError("nova: rank " + std::to_string(rank_) + " waits for all-reduce #" + std::to_string(h) +
                      ", which it never started");
    Pending p = std::move(it->second);
    pending_.erase(it);
    // A failed sum may still be written by a late peer: its staging buffer
    // is never freed (the job ends at exit anyway).
    struct KeepOnFailure {
      Pending& p;
      ~KeepOnFailure() {
        if (std::uncaught_exceptions() > 0 && !p.staging.empty()) new std::vector<std::uint8_t>(std::move(p.staging));
      }
    } keep{p};
    finish(p.request, "all-reduce #" + std::to_string(h) + " (" + std::to_string(p.count) + " x " +
                          std::string(name_of(p.dtype)) + (p.unpack.empty() ? "" : ", " + std::to_string(p.unpack.size()) + " buffers") + ")");
    std::size_t width = size_of(p.dtype), at = 0;
    for (const Buffer& b : p.unpack) {
      std::memcpy(b.data, p.staging.data() + at, b.count * width);
      at += b.count * width;
    }
    if (!p.staging.empty()) spares_.push_back(std::move(p.staging));
  }

  // One test drives MPI's progress engine, which advances every started
  // collective.
  void progress() override {
    for (auto& [h, p] : pending_)
      if (p.request != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
        return;
      }
  }

  void broadcast(std::vector<std::uint8_t>& bytes, int root) override {
    unsigned long long n = bytes.size();
    MPI_Request request;
    int rc = MPI_Ibcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, comm_, &request);
    if (rc != MPI_SUCCESS) throw DistError("nova: MPI_Ibcast failed: " + mpi_error(rc));
    finish(request, "broadcast from rank " + std::to_string(root) + " (its size)");
    if (rank_ != root) bytes.resize(n);
    for (std::size_t at = 0; at < n;) {
      int chunk = static_cast<int>(std::min<unsigned long long>(n - at, 1u << 30));
      rc = MPI_Ibcast(bytes.data() + at, chunk, MPI_BYTE, root, comm_, &request);
      if (rc != MPI_SUCCESS) throw DistError("nova: MPI_Ibcast failed: " + mpi_error(rc));
      finish(request, "broadcast of " + std::to_string(n) + " bytes from rank " + std::to_string(root));
      at += static_cast<std::size_t>(chunk);
    }
  }

 private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::size_t count = 0;
    DType dtype = DType::f32;
    std::vector<std::uint8_t> staging; // a packed bucket
    std::vector<Buffer> unpack;        // where its sums go
  };

  /// A staging buffer of `bytes`: one a finished bucket left, so that each
  /// step does not fault in fresh pages for every bucket (starting a 24.56
  /// MiB bucket took 33.48 ms with a new buffer each time, 5.43 ms reused).
  std::vector<std::uint8_t> spare(std::size_t bytes) {
    for (auto it = spares_.begin(); it != spares_.end(); ++it)
      if (it->size() == bytes) {
        std::vector<std::uint8_t> v = std::move(*it);
        spares_.erase(it);
        return v;
      }
    return std::vector<std::uint8_t>(bytes);
  }

  /// Polls `request` until it completes or the timeout passes.
  void finish(MPI_Request& request, const std::string& what) {
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::duration<double>(timeout_s_);
    for (int spins = 0;; ++spins) {
      int done = 0;
      MPI_Status status;
      int rc = request == MPI_REQUEST_NULL ? MPI_SUCCESS : MPI_Test(&request, &done, &status);
      if (rc != MPI_SUCCESS)
        throw DistError("nova: " + what + " failed on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                        ": " + mpi_error(rc));
      if (done || request == MPI_REQUEST_NULL) return;
      if (std::chrono::steady_clock::now() > deadline) {
        broken = true;
        throw DistError("nova: " + what + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                        ": not every rank took part within " + seconds(timeout_s_) +
                        " s (NOVA_DIST_TIMEOUT_S); a peer hung or died");
      }
      // Each round of a sum needs both ranks in MPI: poll without sleeping
      // (yielding the core) for the first 100 ms, then every 50 us.
      if (spins % 64 == 63) {
        if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(100))
          std::this_thread::yield();
        else
          std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_s_;
  Handle next_ = 0;
  std::map<Handle, Pending> pending_;
  std::vector<std::vector<std::uint8_t>> spares_; // staging buffers to reuse
};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (broken) {
    std::fprintf(stderr, "nova: a collective failed; ending every rank of the job (MPI_Abort)\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

} // namespace

std::shared_ptr<Communicator> mpi_world(int* argc, char*** argv) {
  static std::mutex mutex;
  static std::shared_ptr<Communicator> world;
  std::lock_guard lock(mutex);
  if (world) return world;
  // Each rank's thread pool gets its share of the node's cores (before
  // anything reads the target), unless NOVA_NUM_THREADS says otherwise.
  if (!std::getenv("NOVA_NUM_THREADS"))
    if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); local && std::atoi(local) > 1)
      setenv("NOVA_NUM_THREADS", std::to_string(std::max(1, host_target().cores / std::atoi(local))).c_str(), 1);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) throw DistError("nova: MPI_Init_thread failed: " + mpi_error(rc));
    if (provided < MPI_THREAD_SERIALIZED)
      throw DistError("nova: this MPI gives thread level " + std::to_string(provided) +
                      ", below MPI_THREAD_SERIALIZED");
    std::atexit(finalize_at_exit);
  }
  world = std::make_shared<MpiWorld>();
  return world;
}

} // namespace nova::dist
