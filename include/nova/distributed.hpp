// distributed.hpp - the communicator a data-parallel step's all-reduces run on.
//
// A data-parallel group is N ranks, each running the same compiled step on
// its own batch; after each gradient bucket is produced, the ranks sum it
// (then the update divides by N). A Communicator is one rank's end of the
// group: it starts an in-place sum of a buffer across the ranks and later
// waits for it, so communication overlaps the rest of the backward.
//
// This header has the interface and an in-process group (`loopback_group`:
// ranks are threads of one process exchanging through shared memory) that
// tests use, with faults to inject: a rank that never arrives makes every
// other rank's wait fail with a DistError within the timeout, never hang.
// Communicators over processes (MPI) and GPUs (NCCL) implement the same
// interface.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nova/dtype.hpp"
#include "nova/error.hpp"
#include "nova/executable.hpp"

namespace nova {

/// A collective that cannot complete: a peer that died, hung past the
/// timeout, or disagrees about what is being reduced. The message names the
/// operation, its size, the ranks involved and the timeout.
class DistError : public Error {
 public:
  using Error::Error;
};

} // namespace nova

namespace nova::dist {

/// The seconds a wait gives the slowest peer: NOVA_DIST_TIMEOUT_S, else 300.
/// A malformed value is refused with a DistError naming it.
double timeout_from_env();

/// One rank's end of a data-parallel group.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// A started collective; wait() completes it.
  using Handle = std::uint64_t;

  /// Starts summing `count` elements of `dtype` (f32 or f64) at `data`
  /// across the group, in place: after wait(), every rank's buffer holds the
  /// sum, summed in rank order (so every rank's result is bitwise the same).
  /// Every rank must start the same collectives in the same order with the
  /// same count and dtype. `data` must stay valid and untouched until wait.
  virtual Handle start_all_reduce_sum(void* data, std::size_t count, DType dtype) = 0;

  /// One buffer of a bucket.
  struct Buffer {
    void* data;
    std::size_t count;
  };
  /// Starts summing every buffer of a bucket (one dtype), in place; returns
  /// the handles to wait for. By default one start_all_reduce_sum each; a
  /// communicator may send the bucket as one message (MPI packs it).
  virtual std::vector<Handle> start_bucket_sum(const std::vector<Buffer>& buffers, DType dtype) {
    std::vector<Handle> handles;
    for (const Buffer& b : buffers) handles.push_back(start_all_reduce_sum(b.data, b.count, dtype));
    return handles;
  }

  /// Waits for a started collective. Throws DistError if a peer does not
  /// take part within the timeout, or disagrees about the count or dtype.
  virtual void wait(Handle handle) = 0;

  /// Lets started collectives advance; the runtime calls it between the
  /// launches of a step while any is in flight (MPI progresses non-blocking
  /// collectives only inside MPI calls). Never blocks, never throws.
  virtual void progress() {}

  /// Rank `root`'s `bytes`, on every rank: the others' are replaced (their
  /// size too). Blocking; throws DistError as wait() does. For what every
  /// rank must agree on before the first step: the compiled step itself.
  virtual void broadcast(std::vector<std::uint8_t>& bytes, int root) = 0;
};

/// The communicator that steps run on this thread all-reduce through (a
/// step compiled for data-parallel training refuses to run without one).
/// Null clears it. Each rank's thread sets its own.
void set_communicator(std::shared_ptr<Communicator> communicator);
std::shared_ptr<Communicator> communicator();

/// The calling thread's communicator for a step with `collectives` sums, or
/// a DistError saying the step needs one (the runtime's executables call it).
std::shared_ptr<Communicator> required_communicator(std::size_t collectives);

/// Compile once for the whole group: on rank 0, `compile()` (which may find
/// the step in a cache) and its executable description sent to every rank;
/// on the others, rank 0's description loaded, once their own `stable_key`
/// (the step's key, equal in every process of one build: jit.hpp) is found
/// equal to rank 0's and rank 0's `build` (detail::compiler_build()) to
/// theirs. A rank whose step differs (another shape, another build) gets a
/// DistError naming both keys or builds (and `where`, the step's
/// declaration), and so do the others; if rank 0's compile fails, every rank
/// fails with its message. An executable without a description (the
/// interpreter) is not shared: then each rank calls `compile()`.
std::shared_ptr<Executable> agree_on_executable(Communicator& comm, std::array<std::uint64_t, 2> stable_key,
                                                const std::string& build,
                                                const std::function<std::shared_ptr<Executable>()>& compile,
                                                const std::string& where);

/// Faults a loopback group injects (for tests of failure handling).
struct LoopbackFaults {
  /// This rank never takes part in any collective (as if it had died); -1: none.
  int absent_rank = -1;
};

/// `size` communicators of one in-process group (ranks 0..size-1, to be
/// used from one thread each), exchanging through shared memory. Waits give
/// up after `timeout_s` seconds (timeout_from_env() when negative). A
/// failed collective breaks the group: every later start fails too, and no
/// late peer writes into the buffers of the ranks that gave up.
std::vector<std::shared_ptr<Communicator>> loopback_group(int size, double timeout_s = -1,
                                                          LoopbackFaults faults = {});

} // namespace nova::dist
