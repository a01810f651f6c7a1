//===- GpuEmulator.cpp - runs a GPU kernel's IR on the CPU, lane by lane -===//
//
// Values: every SSA value holds one row of `width` elements per thread
// (scalars: width 1; vectors: their elements, row-major; the bf16 MMA
// intrinsic's struct: 4), as doubles: integers (index, i32 bit patterns) and
// f16/bf16/f32 values are all exact in a double. Memrefs are uniform
// descriptors (global argument or shared memory, byte offset, shape).
// Control flow is interpreted for all threads at once under an active mask:
// scf.for needs uniform bounds, scf.if may diverge, a barrier may not.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/GpuEmulator.h"
#include "compiler/target/cuda/MatmulKernelParts.h"
#include "runtime/tensor_map.hpp"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <algorithm>
#include <memory>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <unordered_map>

using namespace mlir;
using namespace mlir::nova;

uint16_t mlir::nova::toHalfBits(float value) {
  _Float16 h = static_cast<_Float16>(value);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

float mlir::nova::fromHalfBits(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

uint16_t mlir::nova::toBFloat16Bits(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  if (std::isnan(value))
    return uint16_t((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1); // round to nearest even
  return uint16_t(u >> 16);
}

float mlir::nova::fromBFloat16Bits(uint16_t bits) {
  uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

namespace {

/// C (m x n, row-major) += A (m x k, rows `lda` apart) B (k x n): each
/// element's sum one fused multiply-add at a time in k's order, as the
/// emulator models a tensor core's f32 accumulation. Built twice, with FMA
/// instructions (vectorized along n) where the CPU has them and with fmaf
/// calls where not: the same bits either way (an fma rounds once). (The
/// clones are x86-64's; elsewhere one build, as the compiler's flags give.)
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define NOVA_FMA_CLONES [[gnu::target_clones("fma", "default")]]
#endif
#endif
#ifndef NOVA_FMA_CLONES
#define NOVA_FMA_CLONES
#endif
NOVA_FMA_CLONES void fmaTile(const float *a, int64_t lda, const float *b, float *c,
                                                      int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const float x = a[i * lda + p];
      for (int64_t j = 0; j < n; ++j)
        c[i * n + j] = std::fma(x, b[p * n + j], c[i * n + j]);
    }
}

/// Raised (as a C++ value, not an exception: MLIR code is built without
/// them) by returning failure up the interpreter.
struct Failure {};

enum class Space { global, shared };

struct MemrefDesc {
  Space space = Space::global;
  int arg = -1;            ///< global: the argument's buffer
  int64_t byteOffset = 0;  ///< shared: into the block's shared memory
  SmallVector<int64_t> shape;
  /// In elements; row-major unless a view's layout says otherwise.
  SmallVector<int64_t> strides;
  Type element;
  int64_t elementBytes = 0;

  void setRowMajor() { strides = computeSuffixProduct(shape); }
};

int64_t bytesOf(Type t) {
  if (t.isIndex())
    return 8;
  return std::max<int64_t>(1, t.getIntOrFloatBitWidth() / 8);
}

/// The shared-memory address of the dynamic shared memory's first byte: as
/// behind a 16-byte static mbarrier group after the 1 KB the driver
/// reserves, so kernels that need 1024-byte aligned tiles must round up.
constexpr int64_t kSharedWindowBase = 1040;

/// i64 values are held as their bit patterns in a double's bytes (a
/// descriptor's high bits would not survive a conversion); index and i32
/// values as numbers.
bool isWide(Type t) { return t.isInteger(64); }
uint64_t bitsOf(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}
double ofBits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

/// One in-flight cp.async.
struct AsyncCopy {
  int64_t thread;
  int arg;
  int64_t srcByte, dstByte, bytes, srcBytes; ///< srcBytes < bytes: the rest is zero-filled
  int64_t issueEpoch, issueAcquired;
};

/// Shared-memory accesses and mbarrier events in order: a block's, or a
/// cluster's (its CTAs' accesses ordered by one count).
struct Clock {
  /// Every shared access and completed phase takes a tick (ordering by
  /// mbarriers, below).
  int64_t tick = 0;
  /// Arrivals, completed phases, loads issued, registers given back, CTAs
  /// exited: what may let a waiting context go on. A context whose wait
  /// found none since it last failed does not run again until one comes;
  /// when no context can, they wait forever (an arrival that completes no
  /// phase, as the producer's arrive.expect_tx, counts too: its loads land
  /// at the next wait).
  int64_t events = 0;
};

// --- warps that wait on each other -----------------------------------------
//
// A divergent scf.if whose branches wait on mbarriers (a warp-specialized
// kernel: a producer warpgroup issuing TMA loads, consumer warpgroups
// releasing stages) runs each branch as a context of its own, one at a
// time: the then-branch first, and a wait for a phase that has not
// completed passes the baton to the next context that can run, round
// robin (tryWaitParity). Such an scf.if inside a context (consumer
// warpgroups on paths of their own) splits it in two the same way, the
// context itself resuming once both have finished. A cluster's CTAs are
// contexts of one baton from their start, each splitting as a block does.
// Each context is an OS thread for its own interpreter stack; the
// emulator's state is touched only by the one holding the baton (handed
// over under the mutex), so a run is deterministic.
struct Contexts {
  std::mutex mutex;
  std::condition_variable turnChanged;
  int turn = -1;
  bool abandoned = false;
  const int64_t *events = nullptr; ///< the clock's
  /// EmulatorLaunch::peersLag: CTA 0's contexts first.
  bool peersLag = false;
  struct Context {
    std::vector<char> mask;
    bool done = false;
    /// Its branches' contexts still running (it runs again at 0).
    int children = 0;
    /// Its CTA's rank in the cluster (0 without one).
    int cta = 0;
    /// The events count when its wait last found itself unmet (-1: it
    /// does not wait): it runs again only after an event since.
    int64_t waitingSince = -1;
  };
  std::deque<Context> all; // (references stay valid as it grows)
  bool runnable(int i) const { return !all[size_t(i)].done && all[size_t(i)].children == 0; }
  bool mayProceed(int i) const { return runnable(i) && all[size_t(i)].waitingSince != *events; }
  /// The next context after `from` that may proceed (an event came since
  /// it last waited), round robin (`from` itself last), with peersLag the
  /// lowest CTA's first; -1: none (with `anyRunnable`, then any that can
  /// run: it retries its wait and finds the deadlock).
  int next(int from, bool anyRunnable = false) const {
    const int n = int(all.size());
    int found = -1;
    for (int step = 1; step <= n; ++step) {
      int i = ((from < 0 ? n - 1 : from) + step) % n;
      if (mayProceed(i) && (found < 0 || (peersLag && all[size_t(i)].cta < all[size_t(found)].cta)))
        found = i;
    }
    if (found < 0 && anyRunnable)
      for (int step = 1; step <= n && found < 0; ++step) {
        int i = ((from < 0 ? n - 1 : from) + step) % n;
        if (runnable(i))
          found = i;
      }
    return found;
  }
};

class Emulator;

/// The CTAs of one cluster as they run together: one clock and baton, the
/// cluster barrier's arrivals.
struct Cluster {
  Clock clock;
  Contexts contexts;
  std::vector<Emulator *> ctas; ///< by rank
  std::vector<char> exited;
  /// barrier.cluster: per CTA, per thread, its arrivals; the tick of the
  /// last release arrival (a wait acquires all before it).
  std::vector<std::vector<int64_t>> arrivals;
  int64_t releasedTick = 0;
};

class Emulator {
public:
  /// A block's emulator, or (with `cluster`) that of the CTA of rank
  /// `rank` in it.
  Emulator(gpu::GPUFuncOp kernel, const EmulatorLaunch &launch, EmulatorReport &report, Cluster *cluster = nullptr,
           int rank = 0)
      : kernel(kernel), launch(launch), report(report), cluster(cluster), rank(rank),
        clock(cluster ? cluster->clock : ownClock) {
    threads = launch.block[0] * launch.block[1] * launch.block[2];
    alignedVectors = kernel->hasAttr(kAlignedVectorsAttr);
    for (std::vector<uint8_t> *arg : launch.args)
      argMemory.emplace_back(arg ? std::span<uint8_t>(arg->data(), arg->size()) : std::span<uint8_t>());
    if (launch.args.empty())
      argMemory = launch.memory;
  }

  bool run() {
    if (auto dims = kernel->getAttrOfType<DenseI32ArrayAttr>(kClusterDimsAttr))
      if (dims.size() != 3 || dims[0] != launch.cluster[0] || dims[1] != launch.cluster[1] ||
          dims[2] != launch.cluster[2])
        return fail(kernel, llvm::formatv("a kernel built for clusters of {0} CTAs launched in clusters of {1} x {2} "
                                          "x {3}",
                                          dims.size() == 3 ? llvm::formatv("{0} x {1} x {2}", dims[0], dims[1], dims[2])
                                                                 .str()
                                                           : std::string("?"),
                                          launch.cluster[0], launch.cluster[1], launch.cluster[2]));
    if (kernel.getNumArguments() != argMemory.size())
      return fail(kernel, llvm::formatv("the kernel takes {0} arguments, the launch gives {1}",
                                        kernel.getNumArguments(), argMemory.size()));
    for (auto [i, arg] : llvm::enumerate(kernel.getArguments())) {
      if (isa<LLVM::LLVMPointerType>(arg.getType())) {
        if (!launch.tensorMaps.count(int(i)))
          return fail(kernel, llvm::formatv("pointer argument {0} is not given a tensor map", i));
        continue;
      }
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity())
        return fail(kernel, "only static, identity-layout memref arguments are supported");
      int64_t bytes = type.getNumElements() * bytesOf(type.getElementType());
      if (int64_t(argMemory[i].size()) != bytes)
        return fail(kernel, llvm::formatv("argument {0} holds {1} bytes, its type {2}", i,
                                          argMemory[i].size(), bytes));
    }
    if (launch.cluster[0] * launch.cluster[1] * launch.cluster[2] != 1)
      return runClusters();
    for (int64_t z = 0; z < launch.grid[2]; ++z)
      for (int64_t y = 0; y < launch.grid[1]; ++y)
        for (int64_t x = 0; x < launch.grid[0]; ++x) {
          blockId = {x, y, z};
          if (!runBlock())
            return false;
          ++report.blocks;
        }
    return true;
  }

private:
  gpu::GPUFuncOp kernel;
  /// kAlignedVectorsAttr: each vector access must be aligned to its size.
  bool alignedVectors = false;
  const EmulatorLaunch &launch;
  EmulatorReport &report;
  std::vector<std::span<uint8_t>> argMemory;
  int64_t threads = 0;
  std::array<int64_t, 3> blockId{};
  Cluster *cluster = nullptr;
  int rank = 0;
  Clock ownClock;
  Clock &clock;

  // Per block.
  struct Reg {
    int64_t width = 1;
    std::vector<double> v;
    /// When it was last defined (wgmma.fence ordering), and the wgmma
    /// that produced it (-1: none), unfinished until a wait_group.
    int64_t serial = 0, wgmma = -1;
    bool fromWgmma = false;
    /// The block that defined it (blockGeneration): a register of an
    /// earlier block is undefined in this one, its storage reused.
    int64_t block = -1;
  };
  int64_t blockGeneration = 0;
  int64_t serialCounter = 0;
  /// A value moved to another register (block arguments, results).
  static void copyMeta(Reg &to, const Reg &from) {
    to.wgmma = from.wgmma;
    to.fromWgmma = from.fromWgmma;
  }
  // Node-based maps: a Reg& or Reg* stays valid while others are added.
  struct ValueKey {
    Value v;
    bool operator==(const ValueKey &o) const { return v == o.v; }
  };
  struct ValueHash {
    size_t operator()(const ValueKey &k) const { return std::hash<const void *>()(k.v.getAsOpaquePointer()); }
  };
  std::unordered_map<ValueKey, Reg, ValueHash> regs;
  std::unordered_map<ValueKey, MemrefDesc, ValueHash> memrefs;
  std::vector<uint8_t> shared;
  // Per byte of shared memory: race tracking and copies in flight.
  std::vector<int32_t> writeThread, writeEpoch, readThread, readEpoch, pending;
  std::vector<uint8_t> manyReaders;
  int64_t epoch = 0;
  // Ordering by mbarriers (a warp-specialized kernel has no block barrier
  // between a stage's reads and its refill): every shared access takes a
  // tick; a thread that has waited for an mbarrier phase is ordered after
  // every access before the phase completed (acquired: that tick), so an
  // access of a byte whose last other access ticked before it is ordered.
  // (A phase orders all the block's earlier accesses, not just its
  // arrivals': the emulator runs one context at a time, and the other
  // checks: wgmma reads in flight, copies in flight, catch early releases.)
  std::vector<int64_t> readTick, writeTick, acquired;
  std::vector<AsyncCopy> copies;
  std::vector<std::vector<int64_t>> uncommitted; ///< per thread: copy ids
  std::vector<std::deque<std::vector<int64_t>>> groups; ///< per thread: committed groups, oldest first
  std::vector<char> active;

  bool fail(Operation *op, const Twine &why, int64_t thread = -1) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "emulator: " << why.str();
    if (op)
      os << " (at '" << op->getName() << "' " << op->getLoc() << ")";
    os << " in block (" << blockId[0] << ", " << blockId[1] << ", " << blockId[2] << ")";
    if (cluster)
      os << " (CTA " << rank << " of its cluster)";
    if (thread >= 0)
      os << ", thread " << thread;
    if (report.ok) // the first (a cluster's CTAs share the report)
      report.error = s;
    report.ok = false;
    return false;
  }

  Reg &def(Value v, int64_t width) {
    Reg &r = regs[ValueKey{v}];
    if (r.block != blockGeneration) {
      // Zero in each lane until written, as in a fresh register (kept
      // across blocks: each block's registers cost no allocation).
      r.block = blockGeneration;
      r.width = width;
      r.v.assign(size_t(threads * width), 0.0);
    }
    r.serial = ++serialCounter;
    r.wgmma = -1;
    r.fromWgmma = false;
    return r;
  }
  const Reg *get(Value v) {
    auto it = regs.find(ValueKey{v});
    return it == regs.end() || it->second.block != blockGeneration ? nullptr : &it->second;
  }

  bool runBlock() {
    clock = Clock{};
    resetBlock();
    return runBody();
  }

  /// The block's state as at its launch.
  void resetBlock() {
    ++blockGeneration; // every register undefined
    memrefs.clear();
    shared.assign(size_t(launch.dynamicSharedBytes), 0xcd); // garbage until written
    size_t n = shared.size();
    writeThread.assign(n, -1);
    writeEpoch.assign(n, -1);
    readThread.assign(n, -1);
    readEpoch.assign(n, -1);
    pending.assign(n, -1);
    manyReaders.assign(n, 0);
    epoch = 0;
    readTick.assign(n, 0);
    writeTick.assign(n, 0);
    acquired.assign(size_t(threads), 0);
    copies.clear();
    uncommitted.assign(size_t(threads), {});
    groups.assign(size_t(threads), {});
    active.assign(size_t(threads), 1);
    resetHopper();
    for (auto [i, arg] : llvm::enumerate(kernel.getArguments())) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type)
        continue; // a tensor map
      MemrefDesc d;
      d.space = Space::global;
      d.arg = int(i);
      d.shape.assign(type.getShape().begin(), type.getShape().end());
      d.setRowMajor();
      d.element = type.getElementType();
      d.elementBytes = bytesOf(d.element);
      memrefs[ValueKey{arg}] = d;
    }
  }

  bool runBody() {
    bool returned = false;
    return runBlockOps(kernel.getBody().front(), {}, returned);
  }

  // --- clusters ------------------------------------------------------------

  /// The grid's clusters one after another, each's CTAs as contexts of
  /// one baton (threads of their own), in rank order from the first.
  bool runClusters() {
    const std::array<int64_t, 3> &dims = launch.cluster;
    const int64_t size = dims[0] * dims[1] * dims[2];
    for (int d = 0; d < 3; ++d)
      if (dims[size_t(d)] < 1 || launch.grid[size_t(d)] % dims[size_t(d)])
        return fail(kernel, llvm::formatv("a cluster of {0} x {1} x {2} CTAs that does not divide the grid of "
                                          "{3} x {4} x {5}",
                                          dims[0], dims[1], dims[2], launch.grid[0], launch.grid[1], launch.grid[2]));
    if (size > 8)
      return fail(kernel, llvm::formatv("a cluster of {0} CTAs (at most 8 without the non-portable size opt-in)",
                                        size));
    for (int64_t z = 0; z < launch.grid[2]; z += dims[2])
      for (int64_t y = 0; y < launch.grid[1]; y += dims[1])
        for (int64_t x = 0; x < launch.grid[0]; x += dims[0]) {
          Cluster cl;
          cl.contexts.events = &cl.clock.events;
          cl.contexts.peersLag = launch.peersLag;
          std::vector<std::unique_ptr<Emulator>> ctas;
          for (int r = 0; r < int(size); ++r) {
            // %cluster_ctarank: x fastest.
            ctas.push_back(std::make_unique<Emulator>(kernel, launch, report, &cl, r));
            ctas.back()->blockId = {x + r % dims[0], y + (r / dims[0]) % dims[1], z + r / (dims[0] * dims[1])};
            ctas.back()->contexts = &cl.contexts;
            ctas.back()->resetBlock(); // before any peer may reach it
            cl.ctas.push_back(ctas.back().get());
            cl.contexts.all.push_back({std::vector<char>(size_t(threads), 1), false, 0, r, -1});
          }
          cl.exited.assign(size_t(size), 0);
          cl.arrivals.assign(size_t(size), std::vector<int64_t>(size_t(threads), 0));
          cl.contexts.turn = 0;
          std::vector<char> ok(size_t(size), 0);
          std::vector<std::thread> running;
          for (int r = 1; r < int(size); ++r)
            running.emplace_back([&, r] { ok[size_t(r)] = ctas[size_t(r)]->runAsCta(); });
          ok[0] = ctas[0]->runAsCta();
          for (std::thread &t : running)
            t.join();
          if (std::find(ok.begin(), ok.end(), 0) != ok.end())
            return false;
          report.blocks += size;
          ++report.clusters;
        }
    return true;
  }

  /// This CTA of a cluster: its root context, from its turn to its exit.
  bool runAsCta() {
    Contexts &c = *contexts;
    bool start;
    {
      std::unique_lock lock(c.mutex);
      c.turnChanged.wait(lock, [&] { return c.turn == rank || c.abandoned; });
      start = !c.abandoned;
    }
    bool ok = false;
    if (start) {
      runningContext = rank;
      active.assign(size_t(threads), 1);
      ok = runBody();
    }
    std::lock_guard lock(c.mutex);
    c.all[size_t(rank)].done = true;
    c.abandoned |= !ok;
    cluster->exited[size_t(rank)] = 1;
    ++clock.events; // a cluster barrier no longer waits for its threads
    c.turn = c.next(rank, /*anyRunnable=*/true);
    c.turnChanged.notify_all();
    return ok;
  }

  /// The CTA of rank `r` of this one's cluster, to be reached by thread t
  /// of this one (an error once it has exited).
  Emulator *peer(Operation *op, int64_t r, int64_t t) {
    if (!cluster || r < 0 || r >= int64_t(cluster->ctas.size())) {
      fail(op, llvm::formatv("CTA rank {0} of a cluster of {1}", r, cluster ? cluster->ctas.size() : 1), t);
      return nullptr;
    }
    if (r != rank && cluster->exited[size_t(r)]) {
      fail(op, llvm::formatv("reaches CTA {0} of the cluster, which has exited (no cluster barrier before its exit "
                             "while peers may still write into it or arrive on its mbarriers)",
                             r),
           t);
      return nullptr;
    }
    return cluster->ctas[size_t(r)];
  }

  // --- memory --------------------------------------------------------------

  /// Byte address of `indices` in `d` for thread t (row-major).
  bool address(Operation *op, const MemrefDesc &d, ValueRange indices, int64_t t, int64_t &byte,
               int64_t trailing = 1) {
    if (indices.size() != d.shape.size())
      return fail(op, "index count does not match the memref's rank");
    int64_t linear = 0;
    for (auto [i, idx] : llvm::enumerate(indices)) {
      const Reg *r = get(idx);
      if (!r)
        return fail(op, "an index has no value");
      int64_t x = int64_t(r->v[size_t(t)]);
      int64_t extent = d.shape[i];
      int64_t need = i + 1 == indices.size() ? trailing : 1;
      if (x < 0 || x + need > extent)
        return fail(op, llvm::formatv("index {0} out of bounds: {1} (extent {2})", i, x, extent), t);
      linear += x * d.strides[i];
    }
    if (trailing > 1 && !d.strides.empty() && d.strides.back() != 1)
      return fail(op, "a vector access along a strided dimension");
    byte = d.byteOffset + linear * d.elementBytes;
    return true;
  }

  uint8_t *bytesAt(Operation *op, const MemrefDesc &d, int64_t byte, int64_t count, int64_t t) {
    std::span<uint8_t> buf = d.space == Space::shared ? std::span<uint8_t>(shared) : argMemory[size_t(d.arg)];
    if (byte < 0 || byte + count > int64_t(buf.size())) {
      fail(op, llvm::formatv("{0} access of {1} bytes at byte {2} is outside its {3} bytes",
                             d.space == Space::shared ? "a shared" : "a global", count, byte, buf.size()),
           t);
      return nullptr;
    }
    return buf.data() + byte;
  }

  /// An ordinary access of an mbarrier's bytes (the NVVM pointer ops').
  bool touchesBarrier(Operation *op, int64_t byte, int64_t count, int64_t t) {
    for (int64_t b = byte; b < byte + count; ++b)
      if (!barrierBytes.empty() && barrierBytes[size_t(b)])
        return fail(op, llvm::formatv("accesses shared byte {0}, which an mbarrier occupies", b), t);
    return true;
  }

  bool sharedRead(Operation *op, int64_t byte, int64_t count, int64_t t) {
    if (!touchesBarrier(op, byte, count, t))
      return false;
    for (int64_t b = byte; b < byte + count; ++b) {
      if (pending[size_t(b)] >= 0) {
        const AsyncCopy &c = copies[size_t(pending[size_t(b)])];
        return fail(op, llvm::formatv("reads shared byte {0} while thread {1}'s cp.async into it has not been "
                                      "waited for (a missing nvgpu.device_async_wait)",
                                      b, c.thread),
                    t);
      }
      if (tmaPending[size_t(b)] >= 0)
        return fail(op, llvm::formatv("reads shared byte {0} while a TMA load into it has not been waited for "
                                      "(a missing mbarrier wait)",
                                      b),
                    t);
      if (writeEpoch[size_t(b)] == epoch && writeThread[size_t(b)] != t && writeTick[size_t(b)] >= acquired[size_t(t)])
        return fail(op, llvm::formatv("reads shared byte {0} that thread {1} wrote with no barrier between "
                                      "(a missing gpu.barrier)",
                                      b, writeThread[size_t(b)]),
                    t);
      stampRead(b, t);
    }
    return true;
  }

  /// Byte b read by thread t in this epoch (for the write-after-read check).
  void stampRead(int64_t b, int64_t t) {
    readTick[size_t(b)] = ++clock.tick;
    if (readEpoch[size_t(b)] != epoch) {
      readEpoch[size_t(b)] = int32_t(epoch);
      readThread[size_t(b)] = int32_t(t);
      manyReaders[size_t(b)] = 0;
    } else if (readThread[size_t(b)] != t) {
      manyReaders[size_t(b)] = 1;
    }
  }

  /// Each thread's address in the op at hand (-1: none), shared or global
  /// (an offset into the op's buffer), reset for each op.
  std::vector<int64_t> sharedLanes, globalLanes;
  std::vector<int64_t> &laneScratch(std::vector<int64_t> &lanes) {
    lanes.assign(size_t(threads), -1);
    return lanes;
  }

  /// One op's requests in each warp with a lane in it (`byteOf[t]`: thread
  /// t's address, -1 where it takes no part), in the bank model's
  /// wavefronts or in sectors (GpuRequestCost.h).
  void countRequests(Operation *op, std::span<const int64_t> byteOf, int64_t bytes, bool shared) {
    AccessCost *cost = nullptr;
    for (int64_t first = 0; first < int64_t(byteOf.size()); first += 32) {
      auto lanes = byteOf.subspan(size_t(first), size_t(std::min<int64_t>(32, int64_t(byteOf.size()) - first)));
      if (llvm::all_of(lanes, [](int64_t b) { return b < 0; }))
        continue;
      if (!cost)
        cost = &(shared ? report.sharedByOp : report.globalByOp)[op];
      cost->add(shared ? sharedRequestCost(lanes, bytes) : globalRequestCost(lanes, bytes));
    }
  }

  /// A write by thread t to shared bytes, ordered after every access of
  /// epochs before `since` (a plain store: since = epoch) and every access
  /// that ticked before `ordered` (what t had acquired when it issued it).
  bool sharedWrite(Operation *op, int64_t byte, int64_t count, int64_t t, int64_t since, int64_t ordered) {
    if (!touchesBarrier(op, byte, count, t))
      return false;
    for (int64_t b = byte; b < byte + count; ++b) {
      if (!wgmmaReading.empty() && wgmmaReading[size_t(b)] > 0)
        return fail(op, llvm::formatv("a store overwrites shared byte {0} that an unfinished wgmma reads "
                                      "(no wgmma.wait_group for it before the write)",
                                      b),
                    t);
      if (readEpoch[size_t(b)] >= since && readTick[size_t(b)] >= ordered &&
          (manyReaders[size_t(b)] || readThread[size_t(b)] != t))
        return fail(op, llvm::formatv("writes shared byte {0} that {1} read with no barrier between "
                                      "(a missing gpu.barrier before the buffer is refilled, or no mbarrier "
                                      "phase completed after the read that the writer waited for)",
                                      b, manyReaders[size_t(b)] ? std::string("other threads")
                                                                : "thread " + std::to_string(readThread[size_t(b)])),
                    t);
      if (writeEpoch[size_t(b)] >= since && writeTick[size_t(b)] >= ordered && writeThread[size_t(b)] != t)
        return fail(op, llvm::formatv("writes shared byte {0} that thread {1} also wrote with no barrier between",
                                      b, writeThread[size_t(b)]),
                    t);
      writeEpoch[size_t(b)] = int32_t(epoch);
      writeTick[size_t(b)] = ++clock.tick;
      writeThread[size_t(b)] = int32_t(t);
      genericWritten[size_t(b)] = 1;
    }
    return true;
  }

  double loadElement(Type t, const uint8_t *p) {
    if (t.isF32()) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    if (t.isF16() || t.isBF16()) {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return t.isF16() ? fromHalfBits(bits) : fromBFloat16Bits(bits);
    }
    if (t.isF64()) {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    if (t.isInteger(32)) {
      int32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
    int64_t i;
    std::memcpy(&i, p, 8);
    return isWide(t) ? ofBits(uint64_t(i)) : double(i);
  }

  void storeElement(Type t, uint8_t *p, double v) {
    if (t.isF32()) {
      float f = float(v);
      std::memcpy(p, &f, 4);
    } else if (t.isF16() || t.isBF16()) {
      uint16_t bits = t.isF16() ? toHalfBits(float(v)) : toBFloat16Bits(float(v));
      std::memcpy(p, &bits, 2);
    } else if (t.isF64()) {
      std::memcpy(p, &v, 8);
    } else if (t.isInteger(32)) {
      int32_t i = int32_t(int64_t(v));
      std::memcpy(p, &i, 4);
    } else {
      int64_t i = isWide(t) ? int64_t(bitsOf(v)) : int64_t(v);
      std::memcpy(p, &i, 8);
    }
  }

  /// The 16-bit pattern of a 16-bit float element value.
  static uint32_t bits16(Type t, double v) {
    return t.isF16() ? toHalfBits(float(v)) : toBFloat16Bits(float(v));
  }
  static double from16(Type t, uint32_t bits) {
    return t.isF16() ? fromHalfBits(uint16_t(bits)) : fromBFloat16Bits(uint16_t(bits));
  }
  static uint32_t bits32(double v) {
    float f = float(v);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  }
  static double from32(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }

  // --- cp.async ------------------------------------------------------------

  bool land(Operation *op, int64_t id) {
    AsyncCopy &c = copies[size_t(id)];
    std::span<uint8_t> src = argMemory[size_t(c.arg)];
    if (!sharedWrite(op, c.dstByte, c.bytes, c.thread, c.issueEpoch, c.issueAcquired))
      return false;
    for (int64_t b = 0; b < c.bytes; ++b) {
      shared[size_t(c.dstByte + b)] = b < c.srcBytes ? src[size_t(c.srcByte + b)] : 0;
      pending[size_t(c.dstByte + b)] = -1;
    }
    return true;
  }

  // --- Hopper: mbarriers, TMA loads, wgmma ----------------------------------

  /// One mbarrier object (ptx-semantics.md §7e).
  struct MBarrier {
    bool live = false, fenced = false;
    int64_t initThread = -1, initEpoch = -1;
    int64_t phase = 0, pending = 0, expected = 0, tx = 0;
    int64_t completedTick = 0; ///< when its last phase completed
    int64_t initTick = 0;      ///< when it was initialized (a peer's use must be ordered after)
    std::vector<int64_t> inflight; ///< TMA loads completing on it
  };
  struct TmaLoad {
    int64_t thread, map, dstAddress, issueEpoch, issueAcquired;
    SmallVector<int64_t> coords;
  };
  struct WgmmaRun {
    /// Shared bytes it reads (element starts), per warpgroup's first thread.
    std::vector<std::pair<int64_t, int64_t>> reads; ///< (byte, thread)
    int64_t bytes = 0;
    bool done = false;
  };
  std::unordered_map<ValueKey, std::vector<MBarrier>, ValueHash> mbarriers;
  /// The NVVM pointer ops' mbarriers, by shared address, and per shared
  /// byte whether it is one's (no ordinary access may touch it).
  std::map<int64_t, MBarrier> addressBarriers;
  std::vector<uint8_t> barrierBytes;
  std::unordered_map<ValueKey, int64_t, ValueHash> tensorMapArgs; ///< map value -> kernel argument
  std::vector<TmaLoad> tmaLoads;
  std::vector<int32_t> tmaPending;   ///< per shared byte: the TMA load in flight into it, or -1
  std::vector<int32_t> wgmmaReading; ///< per shared byte: unfinished wgmmas reading it
  /// Per shared byte: last written through the generic proxy (stores,
  /// cp.async) with no fence.proxy.async since: the async proxy (wgmma)
  /// may not see it.
  std::vector<uint8_t> genericWritten;
  std::vector<WgmmaRun> wgmmaRuns;
  std::vector<int64_t> wgmmaUncommitted;
  std::deque<std::vector<int64_t>> wgmmaGroups;
  int64_t wgmmaFenceSerial = -1, unfinishedWgmmas = 0;
  /// setmaxnreg: each warpgroup's registers a thread, and the block's pool
  /// of registers no warpgroup holds. A block is launched with all a thread
  /// may take (launchedRegistersPerThread: what ptxas gives a kernel that
  /// uses setmaxnreg), the pool empty.
  std::vector<int64_t> warpgroupRegisters;
  int64_t freeRegisters = 0;

  void resetHopper() {
    warpgroupRegisters.assign(size_t((threads + 127) / 128), launchedRegistersPerThread(threads));
    freeRegisters = 0;
    mbarriers.clear();
    addressBarriers.clear();
    barrierBytes.assign(shared.size(), 0);
    tensorMapArgs.clear();
    tmaLoads.clear();
    tmaPending.assign(shared.size(), -1);
    wgmmaReading.assign(shared.size(), 0);
    genericWritten.assign(shared.size(), 0);
    wgmmaRuns.clear();
    wgmmaUncommitted.clear();
    wgmmaGroups.clear();
    wgmmaFenceSerial = -1;
    unfinishedWgmmas = 0;
  }

  /// Whether thread t's predicate (absent: true) holds.
  bool predicated(Value predicate, int64_t t) {
    if (!predicate)
      return true;
    const Reg *p = get(predicate);
    return p && p->v[size_t(t)] != 0;
  }

  /// Barrier `index` (this thread's value) of `group`, in this CTA or
  /// (`in`) a peer's.
  MBarrier *barrierAt(Operation *op, Value group, Value index, int64_t t, Emulator *in = nullptr) {
    in = in ? in : this;
    auto it = in->mbarriers.find(ValueKey{group});
    const Reg *i = get(index);
    if (it == in->mbarriers.end() || !i) {
      fail(op,
           in == this ? std::string("an mbarrier of no nvgpu.mbarrier.create")
                      : llvm::formatv("CTA {0} of the cluster has not created the mbarrier (no cluster barrier after "
                                      "its inits before its peers use them)",
                                      in->rank)
                            .str(),
           t);
      return nullptr;
    }
    int64_t id = int64_t(i->v[size_t(t)]);
    if (id < 0 || id >= int64_t(it->second.size())) {
      fail(op, llvm::formatv("mbarrier {0} of a group of {1}", id, it->second.size()), t);
      return nullptr;
    }
    return &it->second[size_t(id)];
  }

  /// A peer's use of this CTA's mbarrier, by its thread t with what that
  /// thread acquired: live, its init ordered before by a cluster barrier.
  bool peerUseBarrier(Operation *op, MBarrier &bar, int64_t t, int64_t acquiredByUser, int64_t userRank) {
    if (!bar.live || acquiredByUser < bar.initTick)
      return fail(op, llvm::formatv("CTA {0} uses an mbarrier of CTA {1} {2} (a cluster barrier between the init "
                                    "and the peers' uses orders them)",
                                    userRank, rank,
                                    bar.live ? "initialized with no cluster barrier between" : "not initialized"),
                  t);
    return true;
  }

  /// The mbarrier of the NVVM pointer ops at shared address `address`
  /// (this thread's value) in this CTA or (`in`) a peer's; `initializing`:
  /// created there if none.
  MBarrier *barrierAtAddress(Operation *op, Value address, int64_t t, Emulator *in = nullptr,
                             bool initializing = false) {
    in = in ? in : this;
    const Reg *a = get(address);
    if (!a) {
      fail(op, "the mbarrier's address has no value", t);
      return nullptr;
    }
    const int64_t at = int64_t(a->v[size_t(t)]), byte = at - kSharedWindowBase;
    if (at % 8 || byte < 0 || byte + 8 > int64_t(in->shared.size())) {
      fail(op, llvm::formatv("an mbarrier at shared address {0} (8-byte aligned, inside the {1} bytes of dynamic "
                             "shared memory from address {2})",
                             at, in->shared.size(), kSharedWindowBase),
           t);
      return nullptr;
    }
    auto it = in->addressBarriers.find(at);
    if (it == in->addressBarriers.end()) {
      if (!initializing) {
        fail(op, llvm::formatv("uses an mbarrier at shared address {0}{1} that was not initialized", at,
                               in == this ? "" : llvm::formatv(" of CTA {0}", in->rank).str()),
             t);
        return nullptr;
      }
      it = in->addressBarriers.emplace(at, MBarrier{}).first;
      std::fill(in->barrierBytes.begin() + byte, in->barrierBytes.begin() + byte + 8, 1);
    }
    return &it->second;
  }

  /// mbarrier.init.shared [address], count by the threads whose predicate
  /// holds; its 8 bytes are the mbarrier's from then on.
  bool addressBarrierInit(NVVM::MBarrierInitSharedOp op) {
    const Reg *count = get(op.getCount());
    for (int64_t t = 0; t < threads; ++t) {
      if (!active[size_t(t)] || !predicated(op.getPredicate(), t))
        continue;
      MBarrier *bar = barrierAtAddress(op, op.getAddr(), t, nullptr, /*initializing=*/true);
      if (!bar || !initBarrier(op, *bar, count, t))
        return false;
    }
    return true;
  }

  /// kRemoteArriveAsm: each active thread arrives (release, cluster scope)
  /// on the mbarrier at its address in the CTA of its rank operand.
  bool remoteArrive(LLVM::InlineAsmOp op) {
    if (op.getNumOperands() != 2 || op.getNumResults() != 0)
      return fail(op, "the remote arrive takes an address and a CTA rank");
    const Reg *to = get(op.getOperand(1));
    if (!to)
      return fail(op, "the CTA rank has no value");
    for (int64_t t = 0; t < threads; ++t) {
      if (!active[size_t(t)])
        continue;
      Emulator *cta = peer(op, int64_t(to->v[size_t(t)]), t);
      if (!cta)
        return false;
      MBarrier *bar = barrierAtAddress(op, op.getOperand(0), t, cta);
      if (!bar)
        return false;
      if (cta == this ? !useBarrier(op, *bar, t) : !cta->peerUseBarrier(op, *bar, t, acquired[size_t(t)], rank))
        return false;
      ++clock.events;
      if (--bar->pending < 0)
        return fail(op, llvm::formatv("more arrivals on an mbarrier phase of CTA {0} than its count", cta->rank), t);
      cta->completePhase(*bar);
      if (cta != this)
        ++report.remoteArrivals;
    }
    return true;
  }

  /// The cluster barrier's phases that have completed: those every thread
  /// of the cluster's running CTAs has arrived at; with `behind`, a thread
  /// (CTA, thread) that has arrived at no more.
  int64_t clusterPhasesCompleted(std::pair<int64_t, int64_t> *behind = nullptr) const {
    int64_t completed = INT64_MAX;
    for (size_t r = 0; r < cluster->ctas.size(); ++r)
      if (!cluster->exited[r])
        for (size_t u = 0; u < cluster->arrivals[r].size(); ++u)
          if (cluster->arrivals[r][u] < completed) {
            completed = cluster->arrivals[r][u];
            if (behind)
              *behind = {int64_t(r), int64_t(u)};
          }
    return completed;
  }

  /// barrier.cluster.arrive[.relaxed]: each active thread's arrival, once
  /// a phase (its last phase must have completed); a release one (not
  /// relaxed) orders the thread's accesses before it for those that wait.
  bool clusterArrive(Operation *op, bool release) {
    if (!cluster)
      return fail(op, "a cluster barrier in a kernel launched without a cluster");
    const int64_t completed = clusterPhasesCompleted();
    for (int64_t t = 0; t < threads; ++t)
      if (active[size_t(t)] && cluster->arrivals[size_t(rank)][size_t(t)] > completed)
        return fail(op, "arrives at a cluster barrier again before the phase it arrived at completed", t);
    for (int64_t t = 0; t < threads; ++t)
      if (active[size_t(t)])
        ++cluster->arrivals[size_t(rank)][size_t(t)];
    if (release)
      cluster->releasedTick = ++clock.tick;
    ++clock.events;
    return true;
  }

  /// barrier.cluster.wait: the active threads wait until the phase they
  /// arrived at completed (every thread of the cluster's CTAs that have not
  /// exited arrived as often), then acquire what the arrivals released.
  bool clusterWait(Operation *op) {
    if (!cluster)
      return fail(op, "a cluster barrier in a kernel launched without a cluster");
    int64_t need = 0;
    for (int64_t t = 0; t < threads; ++t)
      if (active[size_t(t)]) {
        if (cluster->arrivals[size_t(rank)][size_t(t)] == 0)
          return fail(op, "barrier.cluster.wait with no arrive before it", t);
        need = std::max(need, cluster->arrivals[size_t(rank)][size_t(t)]);
      }
    std::pair<int64_t, int64_t> behind;
    while (clusterPhasesCompleted(&behind) < need)
      if (!waitAgain(op, -1, [&](const char *others) {
            return llvm::formatv("waits forever at a cluster barrier: thread {0} of CTA {1} has not arrived "
                                 "there{2}",
                                 behind.second, behind.first, others)
                .str();
          }))
        return false;
    for (int64_t t = 0; t < threads; ++t)
      if (active[size_t(t)])
        acquired[size_t(t)] = std::max(acquired[size_t(t)], cluster->releasedTick);
    ++report.clusterBarriers;
    return true;
  }

  /// A use of a live mbarrier, ordered after its init.
  bool useBarrier(Operation *op, MBarrier &bar, int64_t t) {
    if (!bar.live)
      return fail(op, "uses an mbarrier that was not initialized", t);
    if (bar.initThread != t && bar.initEpoch == epoch)
      return fail(op, llvm::formatv("uses an mbarrier thread {0} initialized with no barrier between",
                                    bar.initThread),
                  t);
    return true;
  }

  void completePhase(MBarrier &bar) {
    if (bar.pending == 0 && bar.tx == 0) {
      ++bar.phase;
      bar.pending = bar.expected;
      bar.completedTick = ++clock.tick;
      ++clock.events;
    }
  }

  /// `f(t, bar)` for each active thread whose predicate holds, with the
  /// mbarrier it names (used: live and ordered after its init, unless
  /// `initializing`); stops at the first failure.
  template <typename F>
  bool forEachArrival(Operation *op, Value predicate, Value group, Value index, bool initializing, F f) {
    for (int64_t t = 0; t < threads; ++t) {
      if (!active[size_t(t)] || !predicated(predicate, t))
        continue;
      MBarrier *bar = barrierAt(op, group, index, t);
      if (!bar || (!initializing && !useBarrier(op, *bar, t)) || !f(t, *bar))
        return false;
    }
    return true;
  }

  bool mbarrierInit(nvgpu::MBarrierInitOp op) {
    const Reg *count = get(op.getCount());
    return forEachArrival(op, op.getPredicate(), op.getBarriers(), op.getMbarId(), true,
                          [&](int64_t t, MBarrier &bar) { return initBarrier(op, bar, count, t); });
  }

  /// Thread t's mbarrier.init of `bar` with its value of `count`.
  bool initBarrier(Operation *op, MBarrier &bar, const Reg *count, int64_t t) {
    if (bar.live)
      return fail(op, "initializes a live mbarrier again", t);
    const int64_t n = count ? int64_t(count->v[size_t(t)]) : 0;
    if (n < 1 || n >= (int64_t(1) << 20))
      return fail(op, llvm::formatv("an mbarrier count of {0}", n), t);
    bar = MBarrier{};
    bar.live = true;
    bar.initThread = t;
    bar.initEpoch = epoch;
    bar.initTick = ++clock.tick;
    bar.pending = bar.expected = n;
    return true;
  }

  /// mbarrier.arrive (no transaction bytes): a consumer releasing a stage.
  bool arrive(nvgpu::MBarrierArriveOp op) {
    def(op.getToken(), 1); // the state token: nothing reads it
    return forEachArrival(op, Value(), op.getBarriers(), op.getMbarId(), false, [&](int64_t t, MBarrier &bar) {
      ++clock.events;
      if (--bar.pending < 0)
        return fail(op, "more arrivals on an mbarrier phase than its count", t);
      completePhase(bar);
      return true;
    });
  }

  bool arriveExpectTx(nvgpu::MBarrierArriveExpectTxOp op) {
    const Reg *bytes = get(op.getTxcount());
    return forEachArrival(op, op.getPredicate(), op.getBarriers(), op.getMbarId(), false, [&](int64_t t, MBarrier &bar) {
      ++clock.events;
      bar.tx += bytes ? int64_t(bytes->v[size_t(t)]) : 0;
      if (--bar.pending < 0)
        return fail(op, "more arrivals on an mbarrier phase than its count", t);
      completePhase(bar);
      return true;
    });
  }

  bool tmaLoad(nvgpu::TmaAsyncLoadOp op) {
    auto mapArg = tensorMapArgs.find(ValueKey{op.getTensorMapDescriptor()});
    auto dst = memrefs.find(ValueKey{op.getDst()});
    if (mapArg == tensorMapArgs.end() || !launch.tensorMaps.count(int(mapArg->second)))
      return fail(op, "a TMA load through a tensor map the launch does not give");
    if (dst == memrefs.end() || dst->second.space != Space::shared)
      return fail(op, "a TMA load into something other than shared memory");
    const ::nova::TensorMapDesc &map = launch.tensorMaps.at(int(mapArg->second)).map;
    const int64_t dimensions = int64_t(map.dims.size()), bytes = tmaBoxBytes(map);
    if (int64_t(op.getCoordinates().size()) != dimensions)
      return fail(op, "the coordinates and the map disagree in rank");
    // What the driver would refuse to encode (the runtime's own check).
    std::string problem = ::nova::detail::tensor_map_problem(map.dims, map.strides, map.box,
                                                             ::nova::size_of(map.element), map.swizzle_bytes);
    if (!problem.empty())
      return fail(op, "a tensor map cuTensorMapEncodeTiled refuses: " + problem);
    if (dst->second.shape.size() != size_t(dimensions) ||
        std::accumulate(dst->second.shape.begin(), dst->second.shape.end(), int64_t(1), std::multiplies<>()) *
                dst->second.elementBytes !=
            bytes)
      return fail(op, "the destination is not the map's box");
    const Reg *mask = op.getMulticastMask() ? get(op.getMulticastMask()) : nullptr;
    if (op.getMulticastMask() && (!mask || !cluster))
      return fail(op, cluster ? "the multicast mask has no value" : "a multicast TMA load without a cluster");
    for (int64_t t = 0; t < threads; ++t) {
      if (!active[size_t(t)] || !predicated(op.getPredicate(), t))
        continue;
      // The CTAs it lands in: this one, or those of the mask.
      const int64_t bits = mask ? int64_t(mask->v[size_t(t)]) : int64_t(1) << rank;
      if (bits <= 0 || (cluster && bits >> cluster->ctas.size()))
        return fail(op, llvm::formatv("a multicast mask of {0:x} for a cluster of {1}", bits,
                                      cluster ? cluster->ctas.size() : 1),
                    t);
      TmaLoad load{t, mapArg->second, kSharedWindowBase + dst->second.byteOffset, epoch, acquired[size_t(t)], {}};
      for (Value c : op.getCoordinates())
        load.coords.push_back(int64_t(get(c)->v[size_t(t)]));
      if (load.dstAddress % 128)
        return fail(op, llvm::formatv("a TMA destination at shared address {0} (128-byte aligned)", load.dstAddress),
                    t);
      const int64_t first = load.dstAddress - kSharedWindowBase;
      if (first < 0 || first + bytes > int64_t(shared.size()))
        return fail(op, "a TMA box past the dynamic shared memory", t);
      for (int64_t r = 0; r < 64; ++r) {
        if (!(bits >> r & 1))
          continue;
        Emulator *cta = r == rank ? this : peer(op, r, t);
        if (!cta)
          return false;
        MBarrier *bar = barrierAt(op, op.getBarriers(), op.getMbarId(), t, cta);
        if (!bar || (cta == this ? !useBarrier(op, *bar, t) : !cta->peerUseBarrier(op, *bar, t, acquired[size_t(t)], rank)))
          return false;
        if (!bar->fenced)
          return fail(op, llvm::formatv("a TMA load completes on an mbarrier{0} whose init was not fenced for the "
                                        "async proxy (fence.mbarrier_init)",
                                        cta == this ? "" : llvm::formatv(" of CTA {0}", r).str()),
                      t);
        TmaLoad landing = load;
        if (cta != this) {
          // A peer's write: no block barrier of the CTA it lands in orders
          // it (every epoch counts), only what its issuer acquired; its
          // issuer numbered past the CTA's own threads.
          landing.thread = threads * (1 + rank) + t;
          landing.issueEpoch = 0;
        }
        const int64_t id = int64_t(cta->tmaLoads.size());
        // Each 128-byte line maps onto itself: the bytes in flight are [first, first + bytes).
        for (int64_t b = first; b < first + bytes; ++b) {
          if (cta->tmaPending[size_t(b)] >= 0 || cta->pending[size_t(b)] >= 0)
            return fail(op, llvm::formatv("two asynchronous copies in flight write shared byte {0}{1}", b,
                                          cluster ? llvm::formatv(" of CTA {0}", r).str() : ""),
                        t);
          cta->tmaPending[size_t(b)] = int32_t(id);
        }
        cta->tmaLoads.push_back(std::move(landing));
        bar->inflight.push_back(id);
      }
      ++clock.events; // a peer's wait may complete with it
      ++report.tmaLoads;
      if (mask)
        ++report.multicasts;
    }
    return true;
  }

  /// TMA load `id` lands: its box, packed dim 0 fastest and swizzled, with
  /// zeros past the tensor; then complete-tx on its mbarrier.
  bool landTma(Operation *op, int64_t id, MBarrier &bar) {
    const TmaLoad &load = tmaLoads[size_t(id)];
    const EmulatorTensorMap &tm = launch.tensorMaps.at(int(load.map));
    const ::nova::TensorMapDesc &map = tm.map;
    const int64_t es = int64_t(::nova::size_of(map.element)), rank = int64_t(map.dims.size()), bytes = tmaBoxBytes(map);
    const int64_t first = load.dstAddress - kSharedWindowBase;
    if (!sharedWrite(op, first, bytes, load.thread, load.issueEpoch, load.issueAcquired))
      return false;
    for (int64_t b = first; b < first + bytes; ++b)
      if (wgmmaReading[size_t(b)] > 0)
        return fail(op, llvm::formatv("a TMA load overwrites shared byte {0} that an unfinished wgmma reads", b),
                    load.thread);
    const int64_t elements = bytes / es;
    for (int64_t e = 0; e < elements; ++e) {
      int64_t rest = e, source = 0;
      bool inside = true;
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t box = int64_t(map.box[size_t(d)]);
        int64_t c = load.coords[size_t(d)] + rest % box;
        rest /= box;
        inside &= c >= 0 && c < int64_t(map.dims[size_t(d)]);
        source += d == 0 ? c * es : c * int64_t(map.strides[size_t(d - 1)]);
      }
      const int64_t to = swizzledAddress(load.dstAddress + e * es, map.swizzle_bytes) - kSharedWindowBase;
      for (int64_t i = 0; i < es; ++i) {
        if (inside && (source + i < 0 || source + i >= int64_t(tm.global.size())))
          return fail(op, "a TMA element outside the mapped tensor's bytes", load.thread);
        shared[size_t(to + i)] = inside ? tm.global[size_t(source + i)] : 0;
      }
    }
    for (int64_t b = first; b < first + bytes; ++b) {
      tmaPending[size_t(b)] = -1;
      writeEpoch[size_t(b)] = -1; // ordered by the mbarrier wait, not by a block barrier
      genericWritten[size_t(b)] = 0; // written by the async proxy
    }
    bar.tx -= bytes;
    completePhase(bar);
    return true;
  }

  /// mbarrier.try_wait.parity by every active thread. Where a phase has
  /// not completed and another context can run (a producer warpgroup and
  /// its consumers), the baton passes to it and the wait is tried again;
  /// a wait that no phase completion helped since is a deadlock.
  bool tryWaitParity(Operation *op, Value parityValue, const std::function<MBarrier *(int64_t)> &barrierOf) {
    const Reg *parity = get(parityValue);
    for (;;) {
      MBarrier *blocked = nullptr;
      int64_t blockedThread = -1, blockedParity = 0;
      for (int64_t t = 0; t < threads && !blocked; ++t) {
        if (!active[size_t(t)])
          continue;
        MBarrier *bar = barrierOf(t);
        if (!bar)
          return false;
        // The loads it tracks land as late as they may: when a thread waits.
        for (int64_t id : bar->inflight)
          if (!landTma(op, id, *bar))
            return false;
        bar->inflight.clear();
        const int64_t p = parity ? int64_t(parity->v[size_t(t)]) : 0;
        if ((bar->phase & 1) == p) {
          blocked = bar;
          blockedThread = t;
          blockedParity = p;
        }
      }
      if (!blocked) {
        for (int64_t t = 0; t < threads; ++t)
          if (active[size_t(t)])
            acquired[size_t(t)] = std::max(acquired[size_t(t)], barrierOf(t)->completedTick);
        return true;
      }
      const MBarrier state = *blocked;
      if (!waitAgain(op, blockedThread, [&](const char *others) {
            return llvm::formatv("waits forever on an mbarrier for phase parity {0}: phase {1}, {2} arrivals and "
                                 "{3} transaction bytes outstanding{4}",
                                 blockedParity, state.phase, state.pending, state.tx, others)
                .str();
          }))
        return false;
    }
  }

  /// setmaxnreg.{inc,dec}.sync.aligned by whole warpgroups (docs/notes.md,
  /// "PTX beyond"): dec gives a warpgroup's registers above the count back to the
  /// block's pool; inc takes them from it, waiting (another context runs)
  /// until the pool holds them all: an inc no dec can meet waits forever.
  bool setMaxRegisters(NVVM::SetMaxRegisterOp op) {
    const int64_t count = int64_t(op.getRegCount());
    const bool inc = op.getAction() == NVVM::SetMaxRegisterAction::increase;
    if (count % 8 || count < 24 || count > 256)
      return fail(op, llvm::formatv("setmaxnreg to {0} registers (a multiple of 8 from 24 to 256)", count));
    // ptxas knows the registers at entry only with .minnctapersm 1 beside
    // .maxntid; else it may choose fewer and drop setmaxnreg (info C7508).
    auto minBlocks = kernel->getAttrOfType<IntegerAttr>(NVVM::NVVMDialect::getMinctasmAttrName());
    if (!minBlocks || minBlocks.getInt() != 1)
      return fail(op, "setmaxnreg in a kernel without nvvm.minctasm = 1 (.minnctapersm 1): ptxas may launch it "
                      "with fewer registers than the pool setmaxnreg shares out");
    if (!warpgroupsAligned(op))
      return false;
    for (;;) {
      int64_t need = 0;
      for (int64_t w = 0; w < threads / 128; ++w) {
        if (!active[size_t(w * 128)])
          continue;
        const int64_t held = warpgroupRegisters[size_t(w)];
        if (inc ? count < held : count > held)
          return fail(op, llvm::formatv("setmaxnreg.{0} to {1} registers from the {2} warpgroup {3} holds",
                                        inc ? "inc" : "dec", count, held, w),
                      w * 128);
        need += (count - held) * 128;
      }
      if (need <= freeRegisters) {
        freeRegisters -= need;
        for (int64_t w = 0; w < threads / 128; ++w)
          if (active[size_t(w * 128)])
            warpgroupRegisters[size_t(w)] = count;
        ++clock.events; // registers given back are progress for a waiting inc
        return true;
      }
      if (!waitAgain(op, -1, [&](const char *) {
            return llvm::formatv("setmaxnreg.inc to {0} registers waits forever: it needs {1} registers from "
                                 "the block's pool, which holds {2}{3}",
                                 count, need, freeRegisters,
                                 otherContextRuns() ? " (the block's other warps wait too: a deadlock)"
                                                    : " (no other warp can give any back)")
                .str();
          }))
        return false;
    }
  }

  /// The byte of shared memory where wgmma reads element (x, k) of the
  /// matrix `desc` describes (§7b, §7c): x is m for A, n for B.
  static int64_t wgmmaAddress(uint64_t desc, bool kMajor, int64_t x, int64_t k, int64_t es) {
    const int64_t start = int64_t(desc & 0x3FFF) << 4, lbo = int64_t((desc >> 16) & 0x3FFF) << 4,
                  sbo = int64_t((desc >> 32) & 0x3FFF) << 4;
    const int64_t mode = int64_t(desc >> 62), S = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
    const int64_t T = 16 / es;
    int64_t a;
    if (kMajor)
      a = S ? start + (x % 8) * S + (x / 8) * sbo + k * es
            : start + (x % 8) * 16 + (x / 8) * sbo + (k % T) * es + (k / T) * lbo;
    else
      a = S ? start + (x % (S / es)) * es + (x / (S / es)) * lbo + (k % 8) * S + (k / 8) * sbo
            : start + (x % T) * es + (x / T) * sbo + (k % 8) * 16 + (k / 8) * lbo;
    return swizzledAddress(a, S);
  }

  /// wgmma.mma_async, each warpgroup's at once: D = A B + D in f32, k in
  /// order; A and B from shared memory through descriptors. Its results are
  /// unfinished (an error to read, chaining aside) until a wait_group.
  bool wgmmaAsync(NVVM::WgmmaMmaAsyncOp op) {
    if (!warpgroupsAligned(op))
      return false;
    const Reg *C = get(op.getInouts()), *dA = get(op.getDescriptorA()), *dB = get(op.getDescriptorB());
    if (!C || !dA || !dB)
      return fail(op, "a wgmma operand has no value");
    if (!C->fromWgmma && wgmmaFenceSerial < C->serial)
      return fail(op, "a wgmma reads accumulators written since the last wgmma.fence (or with none before it)");
    const int64_t M = op.getShape().getM(), N = op.getShape().getN(), K = op.getShape().getK();
    const NVVM::WGMMATypes type = op.getTypeA();
    const bool sixteen = type == NVVM::WGMMATypes::f16 || type == NVVM::WGMMATypes::bf16;
    if (M != 64 || (sixteen ? K != 16 : K != 8) || (!sixteen && type != NVVM::WGMMATypes::tf32) ||
        op.getTypeB() != type || op.getTypeD() != NVVM::WGMMATypes::f32 || C->width != N / 2)
      return fail(op, "only m64nNk16 f16/bf16 and m64nNk8 tf32 wgmmas into f32 are emulated");
    const bool aKMajor = op.getLayoutA() == NVVM::MMALayout::row, bKMajor = op.getLayoutB() == NVVM::MMALayout::col;
    if (!sixteen && !(aKMajor && bKMajor))
      return fail(op, "a transposed tf32 wgmma operand (only f16 and bf16 may be MN-major)");
    const int64_t es = sixteen ? 2 : 4;
    const bool scaleD = op.getScaleD() == NVVM::WGMMAScaleOut::one;
    const double signA = op.getScaleA() == NVVM::WGMMAScaleIn::neg ? -1 : 1,
                 signB = op.getScaleB() == NVVM::WGMMAScaleIn::neg ? -1 : 1;
    const int64_t id = int64_t(wgmmaRuns.size());
    wgmmaRuns.emplace_back();
    Reg &D = def(op.getResult(), N / 2);
    std::vector<float> a(size_t(64 * K)), bm(size_t(K * N)), c(size_t(64 * N));
    for (int64_t w = 0; w < threads / 128; ++w) {
      const int64_t t0 = w * 128;
      if (!active[size_t(t0)])
        continue;
      uint64_t descA = bitsOf(dA->v[size_t(t0)]), descB = bitsOf(dB->v[size_t(t0)]);
      for (int64_t t = t0; t < t0 + 128; ++t)
        if (bitsOf(dA->v[size_t(t)]) != descA || bitsOf(dB->v[size_t(t)]) != descB)
          return fail(op, "wgmma descriptors that differ within the warpgroup", t);
      if (((descA >> 49) & 7) || ((descB >> 49) & 7))
        return fail(op, "a wgmma descriptor with a base offset (tiles must start on 1024-byte boundaries)", t0);
      auto element = [&](uint64_t desc, bool kMajor, int64_t x, int64_t k, float &value) {
        const int64_t byte = wgmmaAddress(desc, kMajor, x, k, es) - kSharedWindowBase;
        if (byte < 0 || byte + es > int64_t(shared.size()))
          return fail(op, llvm::formatv("a wgmma operand at shared byte {0}, outside the {1} bytes", byte,
                                        shared.size()),
                      t0);
        for (int64_t i = 0; i < es; ++i) {
          if (tmaPending[size_t(byte + i)] >= 0 || pending[size_t(byte + i)] >= 0)
            return fail(op, llvm::formatv("a wgmma reads shared byte {0} while an asynchronous copy into it has not "
                                          "been waited for (a missing mbarrier wait)",
                                          byte + i),
                        t0);
          if (genericWritten[size_t(byte + i)])
            return fail(op, llvm::formatv("a wgmma reads shared byte {0}, written by ordinary stores with no "
                                          "fence.proxy.async since (the async proxy may not see them)",
                                          byte + i),
                        t0);
        }
        const uint8_t *p = shared.data() + byte;
        if (sixteen) {
          uint16_t bits;
          std::memcpy(&bits, p, 2);
          value = type == NVVM::WGMMATypes::f16 ? fromHalfBits(bits) : fromBFloat16Bits(bits);
        } else {
          float f;
          std::memcpy(&f, p, 4);
          value = tf32(f);
        }
        for (int64_t i = 0; i < es; ++i)
          ++wgmmaReading[size_t(byte + i)];
        wgmmaRuns[size_t(id)].reads.push_back({byte, t0});
        return true;
      };
      for (int64_t m = 0; m < 64; ++m)
        for (int64_t k = 0; k < K; ++k)
          if (!element(descA, aKMajor, m, k, a[size_t(m * K + k)]))
            return false;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          if (!element(descB, bKMajor, n, k, bm[size_t(k * N + n)]))
            return false;
      // d_i of thread (warp q, lane g t): row 16 q + g + 8 ((i >> 1) & 1), column 8 (i >> 2) + 2 t + (i & 1).
      auto at = [&](int64_t lane, int64_t i, int64_t q) {
        return std::pair<int64_t, int64_t>{16 * q + (lane >> 2) + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * (lane & 3) + (i & 1)};
      };
      for (int64_t t = t0; t < t0 + 128; ++t)
        for (int64_t i = 0; i < N / 2; ++i) {
          auto [r, col] = at(t % 32, i, (t - t0) / 32);
          c[size_t(r * N + col)] = scaleD ? float(C->v[size_t(t * C->width + i)]) : 0.0f;
        }
      // The scale-ins' signs on the operands (negation is exact).
      if (signA < 0)
        for (float &x : a)
          x = -x;
      if (signB < 0)
        for (float &x : bm)
          x = -x;
      fmaTile(a.data(), K, bm.data(), c.data(), 64, N, K);
      for (int64_t t = t0; t < t0 + 128; ++t)
        for (int64_t i = 0; i < N / 2; ++i) {
          auto [r, col] = at(t % 32, i, (t - t0) / 32);
          D.v[size_t(t * D.width + i)] = c[size_t(r * N + col)];
        }
    }
    wgmmaRuns[size_t(id)].bytes = es;
    D.wgmma = id;
    D.fromWgmma = true;
    wgmmaUncommitted.push_back(id);
    ++unfinishedWgmmas;
    ++report.wgmmas;
    return true;
  }

  /// wgmma.wait_group n: the groups older than the newest n finish; their
  /// reads of shared memory count from now (a refill must come after a
  /// barrier that follows this wait).
  bool wgmmaWait(Operation *op, int64_t keep) {
    if (!warpgroupsAligned(op))
      return false;
    while (int64_t(wgmmaGroups.size()) > keep) {
      for (int64_t id : wgmmaGroups.front()) {
        WgmmaRun &run = wgmmaRuns[size_t(id)];
        // Read by the warpgroup's four warps, each of which waits for itself.
        for (auto [byte, t] : run.reads)
          for (int64_t i = 0; i < run.bytes; ++i) {
            --wgmmaReading[size_t(byte + i)];
            for (int64_t warp = 0; warp < 4; ++warp)
              stampRead(byte + i, t + 32 * warp);
          }
        run.reads.clear();
        run.done = true;
        --unfinishedWgmmas;
      }
      wgmmaGroups.pop_front();
    }
    return true;
  }

  /// Any op but a wgmma (which may chain accumulators) reading a value
  /// of an unfinished wgmma.
  bool unfinishedRead(Operation *op) {
    if (isa<NVVM::WgmmaMmaAsyncOp>(op))
      return true;
    for (Value v : op->getOperands())
      if (const Reg *r = get(v); r && r->wgmma >= 0 && !wgmmaRuns[size_t(r->wgmma)].done)
        return fail(op, "reads the accumulators of a wgmma that no wgmma.wait_group has finished");
    return true;
  }

  bool hopperStep(Operation *op, bool &handled) {
    handled = true;
    if (auto create = dyn_cast<nvgpu::MBarrierCreateOp>(op)) {
      mbarriers[ValueKey{create.getBarriers()}].assign(create.getBarriers().getType().getNumBarriers(), MBarrier{});
      return true;
    }
    if (auto init = dyn_cast<nvgpu::MBarrierInitOp>(op))
      return mbarrierInit(init);
    if (isa<NVVM::FenceMbarrierInitOp>(op)) {
      for (auto &[key, group] : mbarriers)
        for (MBarrier &bar : group)
          if (bar.live && bar.initThread >= 0 && active[size_t(bar.initThread)])
            bar.fenced = true;
      for (auto &[address, bar] : addressBarriers)
        if (bar.live && bar.initThread >= 0 && active[size_t(bar.initThread)])
          bar.fenced = true;
      return true;
    }
    if (auto arrive = dyn_cast<nvgpu::MBarrierArriveExpectTxOp>(op))
      return arriveExpectTx(arrive);
    if (auto release = dyn_cast<nvgpu::MBarrierArriveOp>(op))
      return arrive(release);
    if (auto load = dyn_cast<nvgpu::TmaAsyncLoadOp>(op))
      return tmaLoad(load);
    if (auto wait = dyn_cast<nvgpu::MBarrierTryWaitParityOp>(op))
      return tryWaitParity(op, wait.getPhaseParity(), [&](int64_t t) -> MBarrier * {
        MBarrier *bar = barrierAt(op, wait.getBarriers(), wait.getMbarId(), t);
        return bar && useBarrier(op, *bar, t) ? bar : nullptr;
      });
    if (auto wait = dyn_cast<NVVM::MBarrierTryWaitParitySharedOp>(op))
      return tryWaitParity(op, wait.getPhase(), [&](int64_t t) -> MBarrier * {
        MBarrier *bar = barrierAtAddress(op, wait.getAddr(), t);
        return bar && useBarrier(op, *bar, t) ? bar : nullptr;
      });
    if (auto init = dyn_cast<NVVM::MBarrierInitSharedOp>(op))
      return addressBarrierInit(init);
    if (auto asm_ = dyn_cast<LLVM::InlineAsmOp>(op)) {
      // Programmatic dependent launch: one launch at a time here, so the
      // grids before this one are done; the wait must come first, before
      // any access to what they wrote (the trigger may be anywhere).
      if (asm_.getAsmString() == kGridDependencyWaitAsm) {
        Block &entry = kernel.getBody().front();
        if (op->getBlock() != &entry || &entry.front() != op)
          return fail(op, "griddepcontrol.wait (kGridDependencyWaitAsm) that is not the kernel's first op: the "
                          "kernel may read what the grid before it has not yet written");
        return true;
      }
      if (asm_.getAsmString() == kLaunchDependentsAsm)
        return true;
      if (asm_.getAsmString() != kRemoteArriveAsm)
        return fail(op, "inline asm other than the remote arrive (kRemoteArriveAsm) and griddepcontrol's wait "
                        "and trigger");
      return remoteArrive(asm_);
    }
    if (auto toPointer = dyn_cast<LLVM::IntToPtrOp>(op)) {
      // A shared-memory address as the NVVM mbarrier ops take it.
      const Reg *address = get(toPointer.getArg());
      if (!address)
        return fail(op, "the address has no value");
      Reg &r = def(toPointer, 1);
      for (int64_t t = 0; t < threads; ++t)
        if (active[size_t(t)])
          r.v[size_t(t)] = double(isWide(toPointer.getArg().getType()) ? int64_t(bitsOf(address->v[size_t(t)]))
                                                                        : int64_t(address->v[size_t(t)]));
      return true;
    }
    if (isa<NVVM::ClusterId, NVVM::ClusterDim>(op)) {
      if (!cluster)
        return fail(op, "a cluster register in a kernel launched without a cluster");
      Reg &r = def(op->getResult(0), 1);
      std::fill(r.v.begin(), r.v.end(), double(isa<NVVM::ClusterId>(op) ? rank : int64_t(cluster->ctas.size())));
      return true;
    }
    if (isa<NVVM::ClusterArriveOp, NVVM::ClusterArriveRelaxedOp>(op))
      return clusterArrive(op, isa<NVVM::ClusterArriveOp>(op));
    if (isa<NVVM::ClusterWaitOp>(op))
      return clusterWait(op);
    if (auto cast = dyn_cast<UnrealizedConversionCastOp>(op)) {
      // An !llvm.ptr kernel argument seen as a tensor map.
      auto arg = cast.getNumOperands() == 1 ? dyn_cast<BlockArgument>(cast.getOperand(0)) : BlockArgument();
      if (!arg || arg.getOwner() != &kernel.getBody().front() ||
          !isa<nvgpu::TensorMapDescriptorType>(cast.getResult(0).getType()))
        return fail(op, "only kernel arguments cast to tensor maps are supported");
      tensorMapArgs[ValueKey{cast.getResult(0)}] = arg.getArgNumber();
      return true;
    }
    if (auto pointer = dyn_cast<memref::ExtractAlignedPointerAsIndexOp>(op)) {
      auto it = memrefs.find(ValueKey{pointer.getSource()});
      if (it == memrefs.end() || it->second.space != Space::shared)
        return fail(op, "the address of a buffer other than shared memory");
      Reg &r = def(pointer, 1);
      std::fill(r.v.begin(), r.v.end(), double(kSharedWindowBase + it->second.byteOffset));
      return true;
    }
    if (auto zero = dyn_cast<LLVM::ZeroOp>(op)) {
      auto type = dyn_cast<LLVM::LLVMStructType>(zero.getType());
      if (!type)
        return fail(op, "only structs of zeros are supported");
      def(zero, int64_t(type.getBody().size())); // zero-filled
      return true;
    }
    if (auto fence = dyn_cast<NVVM::FenceProxyOp>(op)) {
      // Generic-proxy writes become visible to the async proxy (the whole
      // block's: threads fence before the barrier that orders them).
      if (fence.getKind() != NVVM::ProxyKind::alias)
        std::fill(genericWritten.begin(), genericWritten.end(), 0);
      return true;
    }
    if (isa<NVVM::WgmmaFenceAlignedOp>(op)) {
      if (!warpgroupsAligned(op))
        return false;
      wgmmaFenceSerial = ++serialCounter;
      return true;
    }
    if (auto mma = dyn_cast<NVVM::WgmmaMmaAsyncOp>(op))
      return wgmmaAsync(mma);
    if (isa<NVVM::WgmmaGroupSyncAlignedOp>(op)) {
      if (!warpgroupsAligned(op))
        return false;
      wgmmaGroups.push_back(std::move(wgmmaUncommitted));
      wgmmaUncommitted.clear();
      return true;
    }
    if (auto wait = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op))
      return wgmmaWait(op, int64_t(wait.getGroup()));
    if (auto setmax = dyn_cast<NVVM::SetMaxRegisterOp>(op))
      return setMaxRegisters(setmax);
    handled = false;
    return true;
  }

  // --- warps that wait on each other ----------------------------------------
  // (Contexts, above: the baton; a cluster's CTAs share one.)
  Contexts *contexts = nullptr;
  std::unique_ptr<Contexts> ownContexts;
  int runningContext = -1;
  llvm::DenseMap<Operation *, bool> waitsInside;

  /// Whether a context other than the running one has yet to finish.
  bool otherContextRuns() {
    if (!contexts)
      return false;
    std::lock_guard lock(contexts->mutex);
    for (int i = 0; i < int(contexts->all.size()); ++i)
      if (i != runningContext && contexts->runnable(i))
        return true;
    return false;
  }

  enum class Turn { again, deadlock, abandoned };
  /// The running context's wait is unmet: the baton passes to a context
  /// that may proceed (an event came since it last waited) and comes back
  /// for another try; deadlock: none may (every other context waits for
  /// something no one can do, or has finished); abandoned: another failed.
  Turn awaitOthers() {
    if (!contexts)
      return Turn::deadlock;
    Contexts &c = *contexts;
    const int me = runningContext;
    std::unique_lock lock(c.mutex);
    c.all[size_t(me)].waitingSince = clock.events;
    const int n = c.next(me);
    if (n < 0)
      return Turn::deadlock;
    c.all[size_t(me)].mask = active;
    c.turn = n;
    c.turnChanged.notify_all();
    c.turnChanged.wait(lock, [&] { return c.turn == me || c.abandoned; });
    if (c.abandoned)
      return Turn::abandoned;
    c.all[size_t(me)].waitingSince = -1;
    runningContext = me;
    active = c.all[size_t(me)].mask;
    return Turn::again;
  }

  /// Another try of an unmet wait (awaitOthers), or its failure: `why`
  /// with whether other contexts wait too.
  bool waitAgain(Operation *op, int64_t thread, const std::function<std::string(const char *)> &why) {
    const Turn turn = awaitOthers();
    if (turn == Turn::again)
      return true;
    if (turn == Turn::abandoned)
      return false;
    const char *who = cluster ? "cluster's" : "block's";
    std::string others = !contexts ? ""
                         : otherContextRuns()
                             ? llvm::formatv(" (the {0} other warps wait too: a deadlock)", who).str()
                             : llvm::formatv(" (the {0} other warps have finished)", who).str();
    return fail(op, why(others.c_str()), thread);
  }

  bool hasWaits(scf::IfOp op) {
    auto [it, inserted] = waitsInside.try_emplace(op, false);
    if (inserted)
      it->second = op->walk([](nvgpu::MBarrierTryWaitParityOp) { return WalkResult::interrupt(); }).wasInterrupted();
    return it->second;
  }

  /// Both branches of `op` (no results) as contexts under their masks: at
  /// the top, or splitting the running context, which resumes after them.
  bool runAsContexts(scf::IfOp op, std::vector<char> thenMask, std::vector<char> elseMask) {
    const bool top = !contexts;
    if (top) {
      ownContexts = std::make_unique<Contexts>();
      contexts = ownContexts.get();
      contexts->events = &clock.events;
    }
    Contexts &c = *contexts;
    const int parent = runningContext;
    int ids[2];
    {
      std::lock_guard lock(c.mutex);
      if (parent >= 0) {
        c.all[size_t(parent)].mask = active;
        c.all[size_t(parent)].children = 2;
      }
      ids[0] = int(c.all.size());
      ids[1] = ids[0] + 1;
      c.all.push_back({std::move(thenMask), false, 0, rank, -1});
      c.all.push_back({std::move(elseMask), false, 0, rank, -1});
      c.turn = ids[launch.elseFirst ? 1 : 0];
    }
    bool ok[2] = {true, true};
    auto run = [&](int branch) {
      const int me = ids[branch];
      bool start;
      {
        std::unique_lock lock(c.mutex);
        c.turnChanged.wait(lock, [&] { return c.turn == me || c.abandoned; });
        start = !c.abandoned;
      }
      if (start) {
        runningContext = me;
        active = c.all[size_t(me)].mask;
        bool returned = false;
        ok[branch] = runBlockOps((branch == 0 ? op.getThenRegion() : op.getElseRegion()).front(), {}, returned);
      } else {
        ok[branch] = false;
      }
      std::lock_guard lock(c.mutex);
      c.all[size_t(me)].done = true;
      c.abandoned |= !ok[branch];
      if (parent >= 0)
        --c.all[size_t(parent)].children;
      c.turn = c.next(me, /*anyRunnable=*/true);
      c.turnChanged.notify_all();
    };
    std::thread other(run, 0);
    run(1);
    other.join();
    if (!top) {
      // This thread goes on as the parent once the baton comes back to it.
      std::unique_lock lock(c.mutex);
      c.turnChanged.wait(lock, [&] { return c.turn == parent || c.abandoned; });
      runningContext = parent;
      active = c.all[size_t(parent)].mask;
      return !c.abandoned && ok[0] && ok[1];
    }
    contexts = nullptr;
    ownContexts.reset();
    runningContext = -1;
    return ok[0] && ok[1];
  }

  // --- the interpreter -----------------------------------------------------

  bool isUniform(const Reg &r, double &value) {
    bool seen = false;
    for (int64_t t = 0; t < threads; ++t) {
      if (!active[size_t(t)])
        continue;
      double v = r.v[size_t(t * r.width)];
      if (seen && v != value)
        return false;
      value = v;
      seen = true;
    }
    return true;
  }

  bool runBlockOps(Block &block, ArrayRef<const Reg *> blockArgs, bool &returned) {
    for (auto [i, arg] : llvm::enumerate(block.getArguments()))
      if (i < blockArgs.size()) {
        Reg &r = def(arg, blockArgs[i]->width);
        copyMeta(r, *blockArgs[i]);
        for (int64_t t = 0; t < threads; ++t)
          if (active[size_t(t)])
            for (int64_t e = 0; e < r.width; ++e)
              r.v[size_t(t * r.width + e)] = blockArgs[i]->v[size_t(t * r.width + e)];
      }
    for (Operation &op : block) {
      if (isa<gpu::ReturnOp>(op)) {
        returned = true;
        return true;
      }
      if (isa<scf::YieldOp>(op))
        return true;
      if (!step(&op))
        return false;
    }
    return true;
  }

  template <typename F>
  bool elementwise(Operation *op, F f) {
    const Reg *a = get(op->getOperand(0));
    const Reg *b = op->getNumOperands() > 1 ? get(op->getOperand(1)) : a;
    if (!a || !b)
      return fail(op, "an operand has no value");
    Reg &r = def(op->getResult(0), a->width);
    Type element = getElementTypeOrSelf(op->getResult(0).getType());
    for (int64_t t = 0; t < threads; ++t)
      if (active[size_t(t)])
        for (int64_t e = 0; e < a->width; ++e) {
          size_t i = size_t(t * a->width + e);
          r.v[i] = roundTo(element, f(a->v[i], b->v[i]));
        }
    return true;
  }

  /// An integer op: operands and result as int64 (i64 values from and to
  /// their bits), the result wrapped to its type's width as the GPU's
  /// integer instructions wrap (wrapTo).
  template <typename F>
  bool integer(Operation *op, F f) {
    const bool wideIn = isWide(getElementTypeOrSelf(op->getOperand(0).getType())),
               wideOut = isWide(getElementTypeOrSelf(op->getResult(0).getType()));
    Type out = op->getResult(0).getType();
    return elementwise(op, [&](double a, double b) {
      int64_t x = wideIn ? int64_t(bitsOf(a)) : ival(a), y = wideIn ? int64_t(bitsOf(b)) : ival(b);
      int64_t r = wrapTo(out, f(x, y));
      return wideOut ? ofBits(uint64_t(r)) : double(r);
    });
  }

  /// `v` as a value of integer type `type` holds it: i1 as 0 or 1; i8 to
  /// i32 wrapped to their width, two's complement, held signed (as their
  /// constants and loads are); i64 and index as they are (index values are
  /// held as numbers, exact to 2^53).
  static int64_t wrapTo(Type type, int64_t v) {
    Type e = getElementTypeOrSelf(type);
    if (!e.isInteger())
      return v;
    const unsigned w = e.getIntOrFloatBitWidth();
    if (w == 1)
      return v & 1;
    return w >= 64 ? v : int64_t(uint64_t(v) << (64 - w)) >> (64 - w);
  }

  /// affine.apply (the canonicalizer folds index arithmetic into them; the
  /// PTX path lowers them to the same arith ops): its map's result on this
  /// thread's index operands.
  bool affineApply(affine::AffineApplyOp op) {
    SmallVector<const Reg *> in;
    for (Value v : op.getMapOperands()) {
      in.push_back(get(v));
      if (!in.back() || in.back()->width != 1)
        return fail(op, "an operand has no scalar value");
    }
    AffineMap map = op.getAffineMap();
    Reg &r = def(op, 1);
    SmallVector<int64_t> dims(map.getNumDims()), symbols(map.getNumSymbols());
    for (int64_t t = 0; t < threads; ++t) {
      if (!active[size_t(t)])
        continue;
      for (unsigned i = 0; i < in.size(); ++i)
        (i < dims.size() ? dims[i] : symbols[i - dims.size()]) = ival(in[i]->v[size_t(t)]);
      r.v[size_t(t)] = double(evalAffine(map.getResult(0), dims, symbols));
    }
    return true;
  }
  /// An affine expression's value (mod non-negative, floordiv and ceildiv
  /// rounding down and up, as the affine dialect defines them). Not
  /// AffineMap::compose: it takes no symbols, and folds by building
  /// expressions in the context, for every thread of every launch.
  static int64_t evalAffine(AffineExpr e, ArrayRef<int64_t> dims, ArrayRef<int64_t> symbols) {
    if (auto d = dyn_cast<AffineDimExpr>(e))
      return dims[d.getPosition()];
    if (auto s = dyn_cast<AffineSymbolExpr>(e))
      return symbols[s.getPosition()];
    if (auto c = dyn_cast<AffineConstantExpr>(e))
      return c.getValue();
    auto bin = cast<AffineBinaryOpExpr>(e);
    const int64_t a = evalAffine(bin.getLHS(), dims, symbols), b = evalAffine(bin.getRHS(), dims, symbols);
    switch (e.getKind()) {
    case AffineExprKind::Add:
      return a + b;
    case AffineExprKind::Mul:
      return a * b;
    case AffineExprKind::Mod:
      return llvm::mod(a, b);
    case AffineExprKind::FloorDiv:
      return llvm::divideFloorSigned(a, b);
    case AffineExprKind::CeilDiv:
      return llvm::divideCeilSigned(a, b);
    default:
      return a;
    }
  }

  /// arith.mului_extended: the low and high halves of the unsigned product
  /// of two w-bit integers.
  bool mulExtended(arith::MulUIExtendedOp op) {
    const Reg *a = get(op.getLhs()), *b = get(op.getRhs());
    if (!a || !b)
      return fail(op, "an operand has no value");
    Type type = op.getLhs().getType();
    const unsigned w = getElementTypeOrSelf(type).getIntOrFloatBitWidth();
    const bool wide = isWide(getElementTypeOrSelf(type));
    const uint64_t mask = unsignedMask(type);
    Reg &low = def(op.getLow(), a->width), &high = def(op.getHigh(), a->width);
    for (int64_t t = 0; t < threads; ++t)
      if (active[size_t(t)])
        for (int64_t e = 0; e < a->width; ++e) {
          const size_t i = size_t(t * a->width + e);
          auto bits = [&](double v) { return (wide ? bitsOf(v) : uint64_t(ival(v))) & mask; };
          const unsigned __int128 p = (unsigned __int128)bits(a->v[i]) * bits(b->v[i]);
          const int64_t lo = wrapTo(type, int64_t(uint64_t(p))), hi = wrapTo(type, int64_t(uint64_t(p >> w)));
          low.v[i] = wide ? ofBits(uint64_t(lo)) : double(lo);
          high.v[i] = wide ? ofBits(uint64_t(hi)) : double(hi);
        }
    return true;
  }

  /// The bits an unsigned comparison of `type` sees (index: 64).
  static uint64_t unsignedMask(Type type) {
    unsigned bits = type.isIndex() ? 64 : getElementTypeOrSelf(type).getIntOrFloatBitWidth();
    return bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
  }

  /// A value of a float type as that type holds it (other types as they are).
  static double roundTo(Type t, double v) {
    if (t.isF32())
      return double(float(v));
    if (t.isF16())
      return fromHalfBits(toHalfBits(float(v)));
    if (t.isBF16())
      return fromBFloat16Bits(toBFloat16Bits(float(v)));
    return v;
  }

  /// A view: the buffer of `source` through the static strides and offset
  /// of `type` (a layout's offset counts from the buffer's start).
  bool view(Operation *op, Value source, MemRefType type) {
    auto it = memrefs.find(ValueKey{source});
    if (it == memrefs.end())
      return fail(op, "a view of a memref with no buffer");
    SmallVector<int64_t> strides;
    int64_t offset = 0;
    if (it->second.space != Space::global || failed(getStridesAndOffset(type, strides, offset)) ||
        !type.hasStaticShape() || ShapedType::isDynamic(offset) ||
        llvm::any_of(strides, ShapedType::isDynamic))
      return fail(op, "a view of shared memory, or with a dynamic shape or layout");
    MemrefDesc d = it->second;
    d.shape.assign(type.getShape().begin(), type.getShape().end());
    d.strides.assign(strides.begin(), strides.end());
    d.byteOffset = offset * d.elementBytes;
    memrefs[ValueKey{op->getResult(0)}] = d;
    return true;
  }

  static int64_t ival(double d) { return int64_t(d); }

  bool step(Operation *op) {
    if (unfinishedWgmmas > 0 && !unfinishedRead(op))
      return false;
    // Constants.
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      Attribute value = c.getValue();
      if (auto i = dyn_cast<IntegerAttr>(value)) {
        Reg &r = def(c, 1);
        int64_t x = wrapTo(i.getType(), i.getValue().getSExtValue());
        std::fill(r.v.begin(), r.v.end(), isWide(i.getType()) ? ofBits(uint64_t(x)) : double(x));
        return true;
      }
      if (auto f = dyn_cast<FloatAttr>(value)) {
        Reg &r = def(c, 1);
        std::fill(r.v.begin(), r.v.end(), f.getValueAsDouble());
        return true;
      }
      if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
        int64_t n = dense.getNumElements();
        Reg &r = def(c, n);
        SmallVector<double> values;
        if (dense.getElementType().isIntOrIndex())
          for (APInt v : dense.getValues<APInt>()) {
            const int64_t x = wrapTo(dense.getElementType(), v.getSExtValue());
            values.push_back(isWide(dense.getElementType()) ? ofBits(uint64_t(x)) : double(x));
          }
        else
          for (APFloat v : dense.getValues<APFloat>())
            values.push_back(v.convertToDouble());
        for (int64_t t = 0; t < threads; ++t)
          for (int64_t e = 0; e < n; ++e)
            r.v[size_t(t * n + e)] = values[size_t(e)];
        return true;
      }
      return fail(op, "unsupported constant");
    }
    // Integer arithmetic (index and i32 exact as doubles, i64 as bits).
    if (isa<arith::AddIOp>(op))
      return integer(op, [](int64_t a, int64_t b) { return a + b; });
    if (isa<arith::SubIOp>(op))
      return integer(op, [](int64_t a, int64_t b) { return a - b; });
    if (isa<arith::MulIOp>(op))
      return integer(op, [](int64_t a, int64_t b) { return a * b; });
    if (isa<arith::DivUIOp, arith::DivSIOp>(op)) {
      for (int64_t t = 0; t < threads; ++t)
        if (const Reg *b = get(op->getOperand(1)); b && active[size_t(t)] && b->v[size_t(t)] == 0)
          return fail(op, "division by zero", t);
      if (isa<arith::DivUIOp>(op) && !op->getResult(0).getType().isIndex()) {
        const uint64_t mask = unsignedMask(op->getResult(0).getType());
        return integer(op, [mask](int64_t a, int64_t b) { return int64_t((uint64_t(a) & mask) / (uint64_t(b) & mask)); });
      }
      return integer(op, [](int64_t a, int64_t b) { return a / b; });
    }
    if (isa<arith::RemUIOp>(op) && !op->getResult(0).getType().isIndex()) {
      const uint64_t mask = unsignedMask(op->getResult(0).getType());
      return integer(op, [mask](int64_t a, int64_t b) { return int64_t((uint64_t(a) & mask) % (uint64_t(b) & mask)); });
    }
    if (isa<arith::RemUIOp, arith::RemSIOp>(op))
      return integer(op, [](int64_t a, int64_t b) { return a % b; });
    if (isa<arith::AndIOp>(op))
      return integer(op, [](int64_t a, int64_t b) { return a & b; });
    if (isa<arith::OrIOp>(op))
      return integer(op, [](int64_t a, int64_t b) { return a | b; });
    if (isa<arith::XOrIOp>(op))
      return integer(op, [](int64_t a, int64_t b) { return a ^ b; });
    if (isa<arith::ShLIOp>(op))
      return integer(op, [](int64_t a, int64_t b) { return int64_t(uint64_t(a) << b); });
    if (isa<arith::ShRUIOp>(op) && !op->getResult(0).getType().isIndex()) {
      const uint64_t mask = unsignedMask(op->getResult(0).getType());
      return integer(op, [mask](int64_t a, int64_t b) { return int64_t((uint64_t(a) & mask) >> b); });
    }
    if (isa<arith::ShRUIOp, arith::ShRSIOp>(op))
      return integer(op, [](int64_t a, int64_t b) { return a >> b; });
    // Float arithmetic in double, rounded to the result type (exact for
    // f32 + - * / and sqrt: double holds every f32 result before rounding).
    if (isa<arith::AddFOp>(op))
      return elementwise(op, [](double a, double b) { return a + b; });
    if (isa<arith::MulFOp>(op))
      return elementwise(op, [](double a, double b) { return a * b; });
    if (isa<arith::SubFOp>(op))
      return elementwise(op, [](double a, double b) { return a - b; });
    if (isa<arith::DivFOp>(op))
      return elementwise(op, [](double a, double b) { return a / b; });
    if (isa<arith::NegFOp>(op))
      return elementwise(op, [](double a, double) { return -a; });
    if (isa<arith::MinimumFOp>(op))
      return elementwise(op, [](double a, double b) {
        return std::isnan(a) || std::isnan(b) ? double(NAN) : std::min(a, b);
      });
    if (isa<arith::MinNumFOp>(op))
      return elementwise(op, [](double a, double b) { return std::fmin(a, b); });
    if (isa<math::SqrtOp>(op))
      return elementwise(op, [](double a, double) { return std::sqrt(a); });
    if (isa<math::RsqrtOp>(op))
      return elementwise(op, [](double a, double) { return 1.0 / std::sqrt(a); });
    if (isa<math::LogOp>(op))
      return elementwise(op, [](double a, double) { return std::log(a); });
    if (isa<math::AbsFOp>(op))
      return elementwise(op, [](double a, double) { return std::fabs(a); });
    if (isa<math::ErfOp>(op))
      return elementwise(op, [](double a, double) { return std::erf(a); });
    if (isa<math::PowFOp>(op))
      return elementwise(op, [](double a, double b) { return std::pow(a, b); });
    if (isa<arith::SIToFPOp, arith::UIToFPOp>(op) && isWide(getElementTypeOrSelf(op->getOperand(0).getType())))
      return elementwise(op, [](double a, double) { return double(int64_t(bitsOf(a))); });
    if (isa<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp, arith::UIToFPOp>(op))
      return elementwise(op, [](double a, double) { return a; });
    if (isa<arith::FPToSIOp, arith::FPToUIOp>(op)) {
      const bool wide = isWide(getElementTypeOrSelf(op->getResult(0).getType()));
      return elementwise(op, [wide](double a, double) {
        return wide ? ofBits(uint64_t(int64_t(std::trunc(a)))) : std::trunc(a);
      });
    }
    if (auto cast = dyn_cast<arith::BitcastOp>(op)) {
      // f64 <-> i64: the same bits either way (i64 values are held as bits).
      Type from = getElementTypeOrSelf(cast.getIn().getType()), to = getElementTypeOrSelf(cast.getType());
      if (from.getIntOrFloatBitWidth() == 64)
        return elementwise(op, [](double a, double) { return a; });
      if (from.isF32() && to.isInteger(32))
        return elementwise(op, [](double a, double) { return double(int32_t(bits32(a))); });
      if (from.isInteger(32) && to.isF32())
        return elementwise(op, [](double a, double) { return from32(uint32_t(int32_t(a))); });
      return fail(op, "only 32- and 64-bit scalar bitcasts are supported");
    }
    if (auto fma = dyn_cast<math::FmaOp>(op)) {
      const Reg *a = get(fma.getA()), *b = get(fma.getB()), *c = get(fma.getC());
      if (!a || !b || !c)
        return fail(op, "an operand has no value");
      Reg &r = def(fma, a->width);
      Type element = getElementTypeOrSelf(fma.getType());
      for (int64_t t = 0; t < threads; ++t)
        if (active[size_t(t)])
          for (int64_t e = 0; e < a->width; ++e) {
            size_t i = size_t(t * a->width + e);
            r.v[i] = roundTo(element, std::fma(a->v[i], b->v[i], c->v[i]));
          }
      return true;
    }
    if (auto cmp = dyn_cast<arith::CmpFOp>(op)) {
      auto pred = cmp.getPredicate();
      using P = arith::CmpFPredicate;
      return elementwise(op, [pred](double a, double b) {
        bool unordered = std::isnan(a) || std::isnan(b);
        switch (pred) {
        case P::OEQ: return double(!unordered && a == b);
        case P::OGT: return double(!unordered && a > b);
        case P::OGE: return double(!unordered && a >= b);
        case P::OLT: return double(!unordered && a < b);
        case P::OLE: return double(!unordered && a <= b);
        case P::ONE: return double(!unordered && a != b);
        case P::ORD: return double(!unordered);
        case P::UEQ: return double(unordered || a == b);
        case P::UGT: return double(unordered || a > b);
        case P::UGE: return double(unordered || a >= b);
        case P::ULT: return double(unordered || a < b);
        case P::ULE: return double(unordered || a <= b);
        case P::UNE: return double(unordered || a != b);
        case P::UNO: return double(unordered);
        case P::AlwaysTrue: return 1.0;
        default: return 0.0;
        }
      });
    }
    if (isa<arith::MaximumFOp>(op)) // NaN-propagating, as PTX max.NaN
      return elementwise(op, [](double a, double b) {
        return std::isnan(a) || std::isnan(b) ? double(NAN) : std::max(a, b);
      });
    if (isa<arith::MaxNumFOp>(op))
      return elementwise(op, [](double a, double b) { return std::fmax(a, b); });
    if (isa<math::TanhOp>(op))
      return elementwise(op, [](double a, double) { return std::tanh(a); });
    if (isa<math::ExpOp>(op))
      return elementwise(op, [](double a, double) { return std::exp(a); });
    if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
      auto pred = cmp.getPredicate();
      const uint64_t mask = unsignedMask(cmp.getLhs().getType());
      return integer(op, [pred, mask](int64_t x, int64_t y) -> int64_t {
        // Unsigned predicates see the operands' bits (a negative label is
        // above any bound, as on the GPU).
        const uint64_t ux = uint64_t(x) & mask, uy = uint64_t(y) & mask;
        switch (pred) {
        case arith::CmpIPredicate::eq:
          return int64_t(x == y);
        case arith::CmpIPredicate::ne:
          return int64_t(x != y);
        case arith::CmpIPredicate::ult:
          return int64_t(ux < uy);
        case arith::CmpIPredicate::slt:
          return int64_t(x < y);
        case arith::CmpIPredicate::ule:
          return int64_t(ux <= uy);
        case arith::CmpIPredicate::sle:
          return int64_t(x <= y);
        case arith::CmpIPredicate::ugt:
          return int64_t(ux > uy);
        case arith::CmpIPredicate::sgt:
          return int64_t(x > y);
        case arith::CmpIPredicate::uge:
          return int64_t(ux >= uy);
        case arith::CmpIPredicate::sge:
          return int64_t(x >= y);
        }
        return 0;
      });
    }
    if (isa<arith::MinUIOp, arith::MaxUIOp>(op)) {
      const uint64_t mask = unsignedMask(op->getOperand(0).getType());
      const bool min = isa<arith::MinUIOp>(op);
      return integer(op, [mask, min](int64_t x, int64_t y) -> int64_t {
        return ((uint64_t(x) & mask) < (uint64_t(y) & mask)) == min ? x : y;
      });
    }
    if (isa<arith::MinSIOp>(op))
      return elementwise(op, [](double a, double b) { return std::min(a, b); });
    if (isa<arith::MaxSIOp>(op))
      return elementwise(op, [](double a, double b) { return std::max(a, b); });
    if (auto select = dyn_cast<arith::SelectOp>(op)) {
      const Reg *c = get(select.getCondition()), *x = get(select.getTrueValue()), *y = get(select.getFalseValue());
      if (!c || !x || !y || c->width != 1)
        return fail(op, "a select with a missing or vector condition");
      Reg &r = def(select, x->width);
      for (int64_t t = 0; t < threads; ++t)
        if (active[size_t(t)])
          for (int64_t e = 0; e < x->width; ++e)
            r.v[size_t(t * x->width + e)] =
                c->v[size_t(t)] != 0 ? x->v[size_t(t * x->width + e)] : y->v[size_t(t * y->width + e)];
      return true;
    }
    if (auto apply = dyn_cast<affine::AffineApplyOp>(op))
      return affineApply(apply);
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp>(op))
      return integer(op, [](int64_t a, int64_t) { return a; });
    if (isa<arith::ExtUIOp>(op)) {
      const uint64_t bits = unsignedMask(op->getOperand(0).getType());
      return integer(op, [bits](int64_t a, int64_t) { return int64_t(uint64_t(a) & bits); });
    }
    if (isa<arith::ExtSIOp>(op)) {
      const bool boolean = getElementTypeOrSelf(op->getOperand(0).getType()).isInteger(1);
      return integer(op, [boolean](int64_t a, int64_t) { return boolean ? -(a & 1) : a; });
    }
    if (isa<arith::TruncIOp>(op))
      return integer(op, [](int64_t a, int64_t) { return a; });
    if (auto mul = dyn_cast<arith::MulUIExtendedOp>(op))
      return mulExtended(mul);
    if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op))
      return shuffleSync(shuffle);
    // Thread and block ids.
    if (auto id = dyn_cast<gpu::ThreadIdOp>(op)) {
      Reg &r = def(id, 1);
      int d = int(id.getDimension());
      for (int64_t t = 0; t < threads; ++t) {
        int64_t x = t % launch.block[0], y = (t / launch.block[0]) % launch.block[1],
                z = t / (launch.block[0] * launch.block[1]);
        r.v[size_t(t)] = double(d == 0 ? x : d == 1 ? y : z);
      }
      return true;
    }
    if (auto id = dyn_cast<gpu::BlockIdOp>(op)) {
      Reg &r = def(id, 1);
      std::fill(r.v.begin(), r.v.end(), double(blockId[size_t(id.getDimension())]));
      return true;
    }
    if (auto dim = dyn_cast<gpu::BlockDimOp>(op)) {
      Reg &r = def(dim, 1);
      std::fill(r.v.begin(), r.v.end(), double(launch.block[size_t(dim.getDimension())]));
      return true;
    }
    if (isa<gpu::BarrierOp>(op)) {
      for (int64_t t = 0; t < threads; ++t)
        if (!active[size_t(t)])
          return fail(op, "a barrier that not every thread of the block reaches", t);
      ++epoch;
      ++report.barriers;
      return true;
    }
    // Memrefs.
    if (auto dyn = dyn_cast<gpu::DynamicSharedMemoryOp>(op)) {
      MemrefDesc d;
      d.space = Space::shared;
      d.shape = {int64_t(shared.size())};
      d.setRowMajor();
      d.element = IntegerType::get(op->getContext(), 8);
      d.elementBytes = 1;
      memrefs[ValueKey{dyn}] = d;
      return true;
    }
    if (auto view = dyn_cast<memref::ViewOp>(op)) {
      auto it = memrefs.find(ValueKey{view.getSource()});
      const Reg *shift = get(view.getByteShift());
      auto type = view.getType();
      if (it == memrefs.end() || !shift || !type.hasStaticShape())
        return fail(op, "a view of an unknown buffer, or of a dynamic shape");
      double s = 0;
      if (!isUniform(*shift, s))
        return fail(op, "a view whose offset differs between threads");
      MemrefDesc d = it->second;
      d.byteOffset += int64_t(s);
      d.shape.assign(type.getShape().begin(), type.getShape().end());
      d.setRowMajor();
      d.element = type.getElementType();
      d.elementBytes = bytesOf(d.element);
      if (d.byteOffset + type.getNumElements() * d.elementBytes > int64_t(shared.size()) &&
          d.space == Space::shared)
        return fail(op, llvm::formatv("a view past the end of the {0} bytes of dynamic shared memory",
                                      shared.size()));
      memrefs[ValueKey{view}] = d;
      return true;
    }
    if (auto v = dyn_cast<memref::SubViewOp>(op))
      return view(op, v.getSource(), v.getType());
    if (auto v = dyn_cast<memref::ExpandShapeOp>(op))
      return view(op, v.getSrc(), v.getResultType());
    if (auto v = dyn_cast<memref::CollapseShapeOp>(op))
      return view(op, v.getSrc(), v.getResultType());
    if (auto v = dyn_cast<memref::TransposeOp>(op))
      return view(op, v.getIn(), v.getType());
    if (auto v = dyn_cast<memref::CastOp>(op))
      return view(op, v.getSource(), cast<MemRefType>(v.getType()));
    if (auto v = dyn_cast<memref::ReinterpretCastOp>(op))
      return view(op, v.getSource(), v.getType());
    if (auto load = dyn_cast<memref::LoadOp>(op))
      return access(op, load.getMemRef(), load.getIndices(), load.getResult(), Value(), 1);
    if (auto store = dyn_cast<memref::StoreOp>(op))
      return access(op, store.getMemRef(), store.getIndices(), Value(), store.getValueToStore(), 1);
    if (auto load = dyn_cast<vector::LoadOp>(op))
      return access(op, load.getBase(), load.getIndices(), load.getResult(), Value(),
                    load.getVectorType().getNumElements());
    if (auto store = dyn_cast<vector::StoreOp>(op))
      return access(op, store.getBase(), store.getIndices(), Value(), store.getValueToStore(),
                    store.getVectorType().getNumElements());
    // Vectors.
    if (auto ex = dyn_cast<vector::ExtractOp>(op))
      return extract(op, ex.getVector(), ex.getStaticPosition(), ex.getResult());
    if (auto ins = dyn_cast<vector::InsertOp>(op))
      return insert(op, ins.getSource(), ins.getDest(), ins.getStaticPosition(), ins.getResult());
    if (auto slice = dyn_cast<vector::ExtractStridedSliceOp>(op))
      return stridedSlice(slice);
    if (auto cast = dyn_cast<vector::BitCastOp>(op))
      return bitcast(cast);
    // nvgpu.
    if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op))
      return asyncCopy(copy);
    if (auto group = dyn_cast<nvgpu::DeviceAsyncCreateGroupOp>(op)) {
      def(group, 1);
      for (int64_t t = 0; t < threads; ++t)
        if (active[size_t(t)]) {
          groups[size_t(t)].push_back(std::move(uncommitted[size_t(t)]));
          uncommitted[size_t(t)].clear();
        }
      return true;
    }
    if (auto wait = dyn_cast<nvgpu::DeviceAsyncWaitOp>(op)) {
      int64_t keep = wait.getNumGroups() ? int64_t(*wait.getNumGroups()) : 0;
      for (int64_t t = 0; t < threads; ++t) {
        if (!active[size_t(t)])
          continue;
        auto &q = groups[size_t(t)];
        while (int64_t(q.size()) > keep) {
          for (int64_t id : q.front())
            if (!land(op, id))
              return false;
          q.pop_front();
        }
      }
      return true;
    }
    if (auto ld = dyn_cast<nvgpu::LdMatrixOp>(op))
      return ldmatrix(ld);
    if (auto mma = dyn_cast<nvgpu::MmaSyncOp>(op))
      return mmaSync(op, mma.getMatrixA(), mma.getMatrixB(), mma.getMatrixC(), mma.getRes(),
                     mma.getTf32Enabled().value_or(false), /*bf16Registers=*/false);
    if (auto call = dyn_cast<LLVM::CallIntrinsicOp>(op)) {
      // ex2.approx.ftz.f32: 2^x (the GPU's is within about 2^-22 of it),
      // subnormal results flushed to 0.
      if (call.getIntrin() == "llvm.nvvm.ex2.approx.ftz.f")
        return elementwise(op, [](double a, double) {
          double y = std::exp2(a);
          return y < double(std::numeric_limits<float>::min()) ? 0.0 : y;
        });
      // cvt.rn.bf16x2.f32 d, a, b: b rounded into d's lower half (element
      // 0), a into its upper half.
      if (call.getIntrin() == "llvm.nvvm.ff2bf16x2.rn") {
        const Reg *hi = get(call.getOperand(0)), *lo = get(call.getOperand(1));
        if (!hi || !lo || hi->width != 1 || lo->width != 1)
          return fail(op, "ff2bf16x2 takes two f32 scalars");
        Reg &r = def(call.getResult(0), 2);
        Type bf16 = BFloat16Type::get(op->getContext());
        for (int64_t t = 0; t < threads; ++t)
          if (active[size_t(t)]) {
            r.v[size_t(2 * t)] = roundTo(bf16, lo->v[size_t(t)]);
            r.v[size_t(2 * t + 1)] = roundTo(bf16, hi->v[size_t(t)]);
          }
        return true;
      }
      if (call.getIntrin() != "llvm.nvvm.mma.m16n8k16.row.col.bf16")
        return fail(op, "unsupported intrinsic " + call.getIntrin().str());
      return mmaSync(op, Value(), Value(), Value(), call.getResult(0), false, /*bf16Registers=*/true);
    }
    if (auto ev = dyn_cast<LLVM::ExtractValueOp>(op)) {
      const Reg *s = get(ev.getContainer());
      if (!s || ev.getPosition().size() != 1)
        return fail(op, "unsupported extractvalue");
      Reg &r = def(ev, 1);
      int64_t p = ev.getPosition()[0];
      for (int64_t t = 0; t < threads; ++t)
        if (active[size_t(t)])
          r.v[size_t(t)] = s->v[size_t(t * s->width + p)];
      return true;
    }
    // Control flow.
    if (auto loop = dyn_cast<scf::ForOp>(op))
      return forLoop(loop);
    if (auto ifOp = dyn_cast<scf::IfOp>(op))
      return ifThen(ifOp);
    bool handled = false;
    if (!hopperStep(op, handled))
      return false;
    return handled || fail(op, "unsupported op");
  }

  bool access(Operation *op, Value memref, ValueRange indices, Value result, Value stored, int64_t n) {
    auto it = memrefs.find(ValueKey{memref});
    if (it == memrefs.end())
      return fail(op, "a memref with no buffer");
    const MemrefDesc &d = it->second;
    const Reg *in = stored ? get(stored) : nullptr;
    if (stored && !in)
      return fail(op, "a stored value has none");
    Reg *out = result ? &def(result, n) : nullptr;
    const int64_t count = n * d.elementBytes;
    std::vector<int64_t> &laneBytes = laneScratch(d.space == Space::shared ? sharedLanes : globalLanes);
    for (int64_t t = 0; t < threads; ++t) {
      if (!active[size_t(t)])
        continue;
      int64_t byte = 0;
      if (!address(op, d, indices, t, byte, n))
        return false;
      laneBytes[size_t(t)] = byte;
      if (n > 1 && alignedVectors && byte % count != 0)
        return fail(op, llvm::formatv("a {0}-byte vector access at {1} byte {2}, in a kernel that promises its "
                                      "vectors aligned to their size ({3})",
                                      count, d.space == Space::shared ? "shared" : "buffer", byte, kAlignedVectorsAttr),
                    t);
      if (d.space == Space::shared &&
          !(out ? sharedRead(op, byte, count, t) : sharedWrite(op, byte, count, t, epoch, acquired[size_t(t)])))
        return false;
      uint8_t *p = bytesAt(op, d, byte, count, t);
      if (!p)
        return false;
      for (int64_t e = 0; e < n; ++e) {
        if (out)
          out->v[size_t(t * n + e)] = loadElement(d.element, p + e * d.elementBytes);
        else
          storeElement(d.element, p + e * d.elementBytes, in->v[size_t(t * in->width + e)]);
      }
    }
    countRequests(op, laneBytes, count, d.space == Space::shared);
    return true;
  }

  static int64_t linearize(ArrayRef<int64_t> shape, ArrayRef<int64_t> position, int64_t &rest) {
    int64_t offset = 0;
    for (size_t i = 0; i < position.size(); ++i)
      offset = offset * shape[i] + position[i];
    rest = 1;
    for (size_t i = position.size(); i < shape.size(); ++i)
      rest *= shape[i];
    return offset * rest;
  }

  bool extract(Operation *op, Value source, ArrayRef<int64_t> position, Value result) {
    const Reg *s = get(source);
    if (!s || llvm::any_of(position, [](int64_t p) { return p < 0; }))
      return fail(op, "an extract at a dynamic position, or of no value");
    int64_t rest;
    int64_t at = linearize(cast<VectorType>(source.getType()).getShape(), position, rest);
    Reg &r = def(result, rest);
    for (int64_t t = 0; t < threads; ++t)
      if (active[size_t(t)])
        for (int64_t e = 0; e < rest; ++e)
          r.v[size_t(t * rest + e)] = s->v[size_t(t * s->width + at + e)];
    return true;
  }

  bool insert(Operation *op, Value source, Value dest, ArrayRef<int64_t> position, Value result) {
    const Reg *s = get(source), *d = get(dest);
    if (!s || !d || llvm::any_of(position, [](int64_t p) { return p < 0; }))
      return fail(op, "an insert at a dynamic position, or of no value");
    int64_t rest;
    int64_t at = linearize(cast<VectorType>(dest.getType()).getShape(), position, rest);
    Reg copy = *d;
    for (int64_t t = 0; t < threads; ++t)
      if (active[size_t(t)])
        for (int64_t e = 0; e < rest; ++e)
          copy.v[size_t(t * copy.width + at + e)] = s->v[size_t(t * s->width + e)];
    Reg &r = def(result, copy.width);
    for (int64_t t = 0; t < threads; ++t)
      if (active[size_t(t)])
        for (int64_t e = 0; e < copy.width; ++e)
          r.v[size_t(t * copy.width + e)] = copy.v[size_t(t * copy.width + e)];
    return true;
  }

  bool stridedSlice(vector::ExtractStridedSliceOp op) {
    auto type = op.getSourceVectorType();
    const Reg *s = get(op.getVector());
    if (!s || type.getRank() != 2)
      return fail(op, "only 2-D strided slices are supported");
    auto offsets = extractFromIntegerArrayAttr<int64_t>(op.getOffsets());
    auto sizes = extractFromIntegerArrayAttr<int64_t>(op.getSizes());
    auto strides = extractFromIntegerArrayAttr<int64_t>(op.getStrides());
    if (llvm::any_of(strides, [](int64_t x) { return x != 1; }))
      return fail(op, "only unit strides are supported");
    while (offsets.size() < 2)
      offsets.push_back(0);
    while (sizes.size() < 2)
      sizes.push_back(type.getShape()[sizes.size()]);
    int64_t cols = type.getShape()[1], width = sizes[0] * sizes[1];
    Reg &r = def(op, width);
    for (int64_t t = 0; t < threads; ++t)
      if (active[size_t(t)])
        for (int64_t i = 0; i < sizes[0]; ++i)
          for (int64_t j = 0; j < sizes[1]; ++j)
            r.v[size_t(t * width + i * sizes[1] + j)] =
                s->v[size_t(t * s->width + (offsets[0] + i) * cols + offsets[1] + j)];
    return true;
  }

  bool bitcast(vector::BitCastOp op) {
    Type from = op.getSourceVectorType().getElementType(), to = op.getResultVectorType().getElementType();
    const Reg *s = get(op.getSource());
    int64_t fromBits = from.getIntOrFloatBitWidth(), toBits = to.getIntOrFloatBitWidth();
    if (!s || (fromBits != 16 && fromBits != 32) || (toBits != 16 && toBits != 32))
      return fail(op, "only bitcasts between 16- and 32-bit elements are supported");
    int64_t n = op.getResultVectorType().getNumElements();
    Reg &r = def(op, n);
    auto toBitsOf = [&](Type t, double v) -> uint64_t {
      if (t.isF16() || t.isBF16())
        return bits16(t, v);
      if (t.isF32())
        return bits32(v);
      return uint64_t(int64_t(v)) & ((uint64_t(1) << t.getIntOrFloatBitWidth()) - 1);
    };
    auto fromBitsOf = [&](Type t, uint64_t b) -> double {
      if (t.isF16() || t.isBF16())
        return from16(t, uint32_t(b));
      if (t.isF32())
        return from32(uint32_t(b));
      int bits = int(t.getIntOrFloatBitWidth());
      int64_t v = int64_t(b);
      if (bits < 64 && (v >> (bits - 1)) & 1)
        v -= int64_t(1) << bits; // signed
      return double(v);
    };
    // One buffer for every lane (a vector of its own was up to 4
    // allocations a lane and bitcast).
    SmallVector<uint16_t, 32> halves;
    for (int64_t t = 0; t < threads; ++t) {
      if (!active[size_t(t)])
        continue;
      // Little-endian: element 0 in the low bits.
      halves.clear();
      for (int64_t e = 0; e < s->width; ++e) {
        uint64_t b = toBitsOf(from, s->v[size_t(t * s->width + e)]);
        halves.push_back(uint16_t(b));
        if (fromBits == 32)
          halves.push_back(uint16_t(b >> 16));
      }
      for (int64_t e = 0; e < n; ++e) {
        uint64_t b = toBits == 16 ? halves[size_t(e)]
                                  : uint64_t(halves[size_t(2 * e)]) | (uint64_t(halves[size_t(2 * e + 1)]) << 16);
        r.v[size_t(t * n + e)] = fromBitsOf(to, b);
      }
    }
    return true;
  }

  bool asyncCopy(nvgpu::DeviceAsyncCopyOp op) {
    auto src = memrefs.find(ValueKey{op.getSrc()}), dst = memrefs.find(ValueKey{op.getDst()});
    if (src == memrefs.end() || dst == memrefs.end() || src->second.space != Space::global ||
        dst->second.space != Space::shared)
      return fail(op, "cp.async copies from a global buffer to shared memory");
    int64_t elements = op.getDstElements().getSExtValue();
    int64_t bytes = elements * dst->second.elementBytes;
    if (bytes != 4 && bytes != 8 && bytes != 16)
      return fail(op, llvm::formatv("cp.async copies 4, 8 or 16 bytes, not {0}", bytes));
    const Reg *srcElements = op.getSrcElements() ? get(op.getSrcElements()) : nullptr;
    Reg &token = def(op.getAsyncToken(), 1);
    std::vector<int64_t> &sharedBytes = laneScratch(sharedLanes), &globalBytes = laneScratch(globalLanes);
    for (int64_t t = 0; t < threads; ++t) {
      if (!active[size_t(t)])
        continue;
      int64_t s, d;
      if (!address(op, src->second, op.getSrcIndices(), t, s, elements) ||
          !address(op, dst->second, op.getDstIndices(), t, d, elements))
        return false;
      sharedBytes[size_t(t)] = d;
      if (s % bytes || d % bytes)
        return fail(op, llvm::formatv("a {0}-byte cp.async at global byte {1}, shared byte {2}: both must be "
                                      "{0}-byte aligned",
                                      bytes, s, d),
                    t);
      if (!bytesAt(op, src->second, s, bytes, t) || !bytesAt(op, dst->second, d, bytes, t))
        return false;
      int64_t srcBytes = srcElements ? int64_t(srcElements->v[size_t(t)]) * dst->second.elementBytes : bytes;
      // (A zero fill reads no global bytes; a partial copy is counted whole.)
      if (srcBytes > 0)
        globalBytes[size_t(t)] = s;
      int64_t id = int64_t(copies.size());
      copies.push_back({t, src->second.arg, s, d, bytes, std::min(srcBytes, bytes), epoch, acquired[size_t(t)]});
      for (int64_t b = d; b < d + bytes; ++b) {
        if (pending[size_t(b)] >= 0 || tmaPending[size_t(b)] >= 0)
          return fail(op, llvm::formatv("two asynchronous copies in flight write shared byte {0}", b), t);
        pending[size_t(b)] = int32_t(id);
      }
      uncommitted[size_t(t)].push_back(id);
      token.v[size_t(t)] = double(id);
      ++report.asyncCopies;
    }
    countRequests(op, sharedBytes, bytes, /*shared=*/true);
    countRequests(op, globalBytes, bytes, /*shared=*/false);
    return true;
  }

  /// Warps whose lanes are all active (the .sync.aligned instructions need them).
  /// A warpgroup instruction (wgmma.*.sync.aligned): each warpgroup of the
  /// block takes part whole or not at all (a producer warpgroup may be
  /// elsewhere), and some does.
  bool warpgroupsAligned(Operation *op) {
    if (threads % 128)
      return fail(op, "a warpgroup instruction in a block that is not whole warpgroups");
    bool any = false;
    for (int64_t w = 0; w < threads / 128; ++w) {
      const bool first = active[size_t(w * 128)];
      any |= first;
      for (int64_t t = w * 128; t < w * 128 + 128; ++t)
        if (bool(active[size_t(t)]) != first)
          return fail(op, "a .sync.aligned warpgroup instruction with some of its warpgroup's threads inactive", t);
    }
    return any || fail(op, "a warpgroup instruction with no thread active");
  }

  /// A .sync.aligned warp instruction: each warp runs it with all its 32
  /// lanes or none (a warp may skip it as a whole, in a branch the same in
  /// all its lanes; some of its lanes may not).
  bool warpsAligned(Operation *op) {
    if (threads % 32)
      return fail(op, "a warp instruction in a block that is not whole warps");
    for (int64_t w = 0; w < threads / 32; ++w)
      for (int64_t lane = 1; lane < 32; ++lane)
        if (active[size_t(w * 32 + lane)] != active[size_t(w * 32)])
          return fail(op, "a .sync.aligned warp instruction with inactive lanes",
                      w * 32 + (active[size_t(w * 32)] ? lane : 0));
    return true;
  }
  bool warpActive(int64_t w) const { return active[size_t(w * 32)]; }

  /// shfl.sync with all 32 lanes taking part (the full mask gpu.shuffle
  /// lowers to): each lane reads the value `offset` names in its warp, its
  /// own where that lane is past `width` (valid false).
  bool shuffleSync(gpu::ShuffleOp op) {
    if (!warpsAligned(op))
      return false;
    const Reg *value = get(op.getValue()), *offset = get(op.getOffset()), *width = get(op.getWidth());
    if (!value || !offset || !width || value->width != 1)
      return fail(op, "a shuffle of a missing or vector value");
    Reg &r = def(op.getShuffleResult(), 1);
    Reg &valid = def(op.getValid(), 1);
    for (int64_t t = 0; t < threads; ++t) {
      if (!active[size_t(t)])
        continue;
      const int64_t lane = t % 32, w = int64_t(width->v[size_t(t)]), o = int64_t(offset->v[size_t(t)]);
      if (w != 32)
        return fail(op, "a shuffle narrower than the warp", t);
      int64_t from = lane;
      switch (op.getMode()) {
      case gpu::ShuffleMode::XOR: from = lane ^ o; break;
      case gpu::ShuffleMode::DOWN: from = lane + o; break;
      case gpu::ShuffleMode::UP: from = lane - o; break;
      case gpu::ShuffleMode::IDX: from = o; break;
      }
      const bool inside = from >= 0 && from < w;
      r.v[size_t(t)] = value->v[size_t(inside ? t - lane + from : t)];
      valid.v[size_t(t)] = inside ? 1.0 : 0.0;
    }
    return true;
  }

  bool ldmatrix(nvgpu::LdMatrixOp op) {
    if (!warpsAligned(op))
      return false;
    auto it = memrefs.find(ValueKey{op.getSrcMemref()});
    if (it == memrefs.end() || it->second.space != Space::shared)
      return fail(op, "ldmatrix reads shared memory");
    const MemrefDesc &d = it->second;
    const int64_t tiles = op.getNumTiles();
    const bool trans = op.getTranspose();
    auto resultType = op.getRes().getType();
    const int64_t perReg = resultType.getShape()[1]; // 2 x 16-bit or 1 x 32-bit
    Type et = resultType.getElementType();
    Reg &r = def(op, tiles * perReg);
    // Lane 8j + q gives row q of matrix j: 16 bytes each.
    std::vector<int64_t> &sharedBytes = laneScratch(sharedLanes);
    for (int64_t w = 0; w < threads / 32; ++w) {
      if (!warpActive(w))
        continue;
      // M[j][q][c]: the 16-bit element c of row q of matrix j, row q from lane 8j + q.
      uint16_t m[4][8][8];
      for (int64_t j = 0; j < tiles; ++j)
        for (int64_t q = 0; q < 8; ++q) {
          int64_t lane = 8 * j + q, t = w * 32 + lane, byte;
          if (!address(op, d, op.getIndices(), t, byte, 16 / d.elementBytes))
            return false;
          if (byte % 16)
            return fail(op, llvm::formatv("ldmatrix row address {0} is not 16-byte aligned", byte), t);
          if (!sharedRead(op, byte, 16, t))
            return false;
          sharedBytes[size_t(t)] = byte;
          for (int64_t c = 0; c < 8; ++c)
            std::memcpy(&m[j][q][c], shared.data() + byte + 2 * c, 2);
        }
      for (int64_t lane = 0; lane < 32; ++lane) {
        int64_t t = w * 32 + lane;
        for (int64_t j = 0; j < tiles; ++j) {
          uint16_t lo, hi;
          if (!trans) {
            lo = m[j][lane / 4][2 * (lane % 4)];
            hi = m[j][lane / 4][2 * (lane % 4) + 1];
          } else {
            lo = m[j][2 * (lane % 4)][lane / 4];
            hi = m[j][2 * (lane % 4) + 1][lane / 4];
          }
          if (perReg == 2) {
            r.v[size_t(t * tiles * 2 + j * 2)] = from16(et, lo);
            r.v[size_t(t * tiles * 2 + j * 2 + 1)] = from16(et, hi);
          } else {
            r.v[size_t(t * tiles + j)] = from32(uint32_t(lo) | (uint32_t(hi) << 16));
          }
        }
      }
    }
    countRequests(op, sharedBytes, 16, /*shared=*/true);
    ++report.ldmatrices;
    return true;
  }

  static float tf32(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u &= 0xffffe000u; // 10 mantissa bits kept, the low 13 dropped
    std::memcpy(&x, &u, 4);
    return x;
  }

  /// mmaSync's bf16 operands unpacked (kept: an MMA allocates nothing).
  std::array<Reg, 3> mmaUnpacked;

  /// One warp MMA per warp: m16n8k16 (f16/bf16) or m16n8k8 (tf32), with the
  /// lane maps of ptx-semantics.md §1/§2. bf16Registers: the intrinsic's
  /// operands (4 + 2 i32 registers holding bf16 pairs, 4 f32).
  bool mmaSync(Operation *op, Value aValue, Value bValue, Value cValue, Value result, bool tf32Enabled,
               bool bf16Registers) {
    if (!warpsAligned(op))
      return false;
    const Reg *A, *B, *C;
    std::array<Reg, 3> &unpacked = mmaUnpacked;
    int64_t K;
    if (bf16Registers) {
      // Unpack the 6 i32 operands into a0..a7, b0..b3.
      K = 16;
      unpacked[0].width = 8;
      unpacked[1].width = 4;
      unpacked[2].width = 4;
      for (auto &u : unpacked)
        u.v.assign(size_t(threads * u.width), 0);
      SmallVector<const Reg *> ops;
      for (Value v : op->getOperands()) {
        const Reg *r = get(v);
        if (!r)
          return fail(op, "an MMA operand has no value");
        ops.push_back(r);
      }
      if (ops.size() != 10)
        return fail(op, "the bf16 MMA intrinsic takes 10 operands");
      for (int64_t t = 0; t < threads; ++t) {
        for (int64_t i = 0; i < 6; ++i) {
          uint32_t bits = uint32_t(int64_t(ops[size_t(i)]->v[size_t(t)]));
          Reg &dst = i < 4 ? unpacked[0] : unpacked[1];
          int64_t base = i < 4 ? 2 * i : 2 * (i - 4);
          dst.v[size_t(t * dst.width + base)] = fromBFloat16Bits(uint16_t(bits));
          dst.v[size_t(t * dst.width + base + 1)] = fromBFloat16Bits(uint16_t(bits >> 16));
        }
        for (int64_t i = 0; i < 4; ++i)
          unpacked[2].v[size_t(t * 4 + i)] = ops[size_t(6 + i)]->v[size_t(t)];
      }
      A = &unpacked[0];
      B = &unpacked[1];
      C = &unpacked[2];
    } else {
      A = get(aValue);
      B = get(bValue);
      C = get(cValue);
      if (!A || !B || !C)
        return fail(op, "an MMA operand has no value");
      Type et = cast<VectorType>(aValue.getType()).getElementType();
      K = et.isF32() ? 8 : 16;
      if (et.isF32() && !tf32Enabled)
        return fail(op, "an f32 mma.sync without tf32Enabled (MLIR 19 cannot lower it)");
    }
    const bool sixteen = K == 16;
    Reg &D = def(result, 4);
    for (int64_t w = 0; w < threads / 32; ++w) {
      if (!warpActive(w))
        continue;
      float a[16][16] = {}, b[16][8] = {}, c[16][8] = {};
      for (int64_t lane = 0; lane < 32; ++lane) {
        int64_t t = w * 32 + lane, g = lane >> 2, tg = lane & 3;
        if (sixteen) {
          for (int64_t i = 0; i < 8; ++i)
            a[g + 8 * ((i >> 1) & 1)][2 * tg + (i & 1) + 8 * (i >> 2)] = float(A->v[size_t(t * 8 + i)]);
          for (int64_t i = 0; i < 4; ++i)
            b[2 * tg + (i & 1) + 8 * (i >> 1)][g] = float(B->v[size_t(t * 4 + i)]);
        } else {
          for (int64_t i = 0; i < 4; ++i)
            a[g + 8 * (i & 1)][tg + 4 * (i >> 1)] = tf32(float(A->v[size_t(t * 4 + i)]));
          for (int64_t i = 0; i < 2; ++i)
            b[tg + 4 * i][g] = tf32(float(B->v[size_t(t * 2 + i)]));
        }
        for (int64_t i = 0; i < 4; ++i)
          c[g + 8 * (i >> 1)][2 * tg + (i & 1)] = float(C->v[size_t(t * 4 + i)]);
      }
      fmaTile(&a[0][0], 16, &b[0][0], &c[0][0], 16, 8, K);
      for (int64_t lane = 0; lane < 32; ++lane) {
        int64_t t = w * 32 + lane, g = lane >> 2, tg = lane & 3;
        for (int64_t i = 0; i < 4; ++i)
          D.v[size_t(t * 4 + i)] = c[g + 8 * (i >> 1)][2 * tg + (i & 1)];
      }
    }
    ++report.mmas;
    return true;
  }

  bool forLoop(scf::ForOp loop) {
    const Reg *lb = get(loop.getLowerBound()), *ub = get(loop.getUpperBound()), *st = get(loop.getStep());
    if (!lb || !ub || !st)
      return fail(loop, "loop bounds have no value");
    double l = 0, u = 0, s = 1;
    if (!isUniform(*lb, l) || !isUniform(*ub, u) || !isUniform(*st, s))
      return fail(loop, "loop bounds that differ between threads");
    SmallVector<Reg> carried;
    for (Value init : loop.getInitArgs()) {
      const Reg *r = get(init);
      if (!r)
        return fail(loop, "a loop-carried value has no initial value");
      carried.push_back(*r);
    }
    Block &body = *loop.getBody();
    Reg iv;
    iv.width = 1;
    iv.v.resize(size_t(threads));
    for (int64_t i = int64_t(l); i < int64_t(u); i += int64_t(s)) {
      std::fill(iv.v.begin(), iv.v.end(), double(i));
      SmallVector<const Reg *> args{&iv};
      for (Reg &c : carried)
        args.push_back(&c);
      bool returned = false;
      if (!runBlockOps(body, args, returned))
        return false;
      auto yield = cast<scf::YieldOp>(body.getTerminator());
      for (auto [k, v] : llvm::enumerate(yield.getOperands())) {
        const Reg *r = get(v);
        if (!r)
          return fail(loop, "a yielded value has none");
        carried[k] = *r;
      }
    }
    for (auto [k, result] : llvm::enumerate(loop.getResults())) {
      Reg &r = def(result, carried[k].width);
      copyMeta(r, carried[k]);
      for (int64_t t = 0; t < threads; ++t)
        if (active[size_t(t)])
          for (int64_t e = 0; e < r.width; ++e)
            r.v[size_t(t * r.width + e)] = carried[k].v[size_t(t * r.width + e)];
    }
    return true;
  }

  /// Both branches under the threads' masks; each result takes, thread by
  /// thread, the value its branch yields.
  bool ifThen(scf::IfOp op) {
    const Reg *cond = get(op.getCondition());
    if (!cond)
      return fail(op, "the condition has no value");
    std::vector<char> saved = active;
    if (op.getNumResults() == 0 && !op.getElseRegion().empty() && hasWaits(op)) {
      std::vector<char> thenMask(saved.size()), elseMask(saved.size());
      bool anyThen = false, anyElse = false;
      for (int64_t t = 0; t < threads; ++t) {
        thenMask[size_t(t)] = saved[size_t(t)] && cond->v[size_t(t)] != 0;
        elseMask[size_t(t)] = saved[size_t(t)] && cond->v[size_t(t)] == 0;
        anyThen |= bool(thenMask[size_t(t)]);
        anyElse |= bool(elseMask[size_t(t)]);
      }
      if (anyThen && anyElse) {
        bool ok = runAsContexts(op, std::move(thenMask), std::move(elseMask));
        active = saved;
        return ok;
      }
    }
    auto runUnder = [&](Region &region, bool when) {
      if (region.empty())
        return true;
      bool any = false;
      for (int64_t t = 0; t < threads; ++t) {
        active[size_t(t)] = saved[size_t(t)] && ((cond->v[size_t(t)] != 0) == when);
        any |= bool(active[size_t(t)]);
      }
      bool returned = false;
      bool ok = !any || runBlockOps(region.front(), {}, returned);
      if (ok && any && op.getNumResults() > 0) {
        for (auto [k, v] : llvm::enumerate(region.front().getTerminator()->getOperands())) {
          const Reg *y = get(v);
          if (!y) {
            ok = fail(op, "a yielded value has none");
            break;
          }
          Reg &r = def(op.getResult(unsigned(k)), y->width);
          copyMeta(r, *y);
          for (int64_t t = 0; t < threads; ++t)
            if (active[size_t(t)])
              for (int64_t e = 0; e < y->width; ++e)
                r.v[size_t(t * y->width + e)] = y->v[size_t(t * y->width + e)];
        }
      }
      active = saved;
      return ok;
    };
    return runUnder(op.getThenRegion(), true) && runUnder(op.getElseRegion(), false);
  }
};

} // namespace

namespace {

AccessCost total(const std::map<std::string, AccessCost> &costs) {
  AccessCost sum;
  for (const auto &[op, cost] : costs)
    sum.merge(cost);
  return sum;
}

} // namespace

AccessCost EmulatorReport::sharedTotal() const { return total(shared); }
AccessCost EmulatorReport::globalTotal() const { return total(global); }

std::vector<std::string> mlir::nova::describeCostlyRequests(const EmulatorReport &report, bool shared,
                                                            size_t most) {
  std::vector<std::pair<std::string, AccessCost>> costly;
  for (const auto &[what, cost] : shared ? report.shared : report.global)
    if (cost.taken != cost.ideal)
      costly.emplace_back(what, cost);
  std::stable_sort(costly.begin(), costly.end(), [](const auto &a, const auto &b) {
    return a.second.taken - a.second.ideal > b.second.taken - b.second.ideal;
  });
  std::vector<std::string> lines;
  for (const auto &[what, cost] : costly) {
    if (lines.size() == most)
      break;
    lines.push_back(shared ? llvm::formatv("{0}: {1} requests, {2} wavefronts for {3}, up to {4}-way", what,
                                           cost.requests, cost.taken, cost.ideal, cost.worstDegree)
                                 .str()
                           : llvm::formatv("{0}: {1} requests, {2} sectors for {3}", what, cost.requests,
                                           cost.taken, cost.ideal)
                                 .str());
  }
  return lines;
}

namespace {

/// `byOp` keyed by what each op is: its name, the view it accesses (a
/// cp.async's shared destination or global source) and its location.
std::map<std::string, AccessCost> byWhat(const std::map<Operation *, AccessCost> &byOp, bool shared) {
  std::map<std::string, AccessCost> out;
  for (const auto &[op, cost] : byOp) {
    std::string key;
    llvm::raw_string_ostream os(key);
    os << "'" << op->getName() << "'";
    Value view;
    if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op))
      view = shared ? copy.getDst() : copy.getSrc();
    else
      for (Value v : op->getOperands())
        if (isa<MemRefType>(v.getType())) {
          view = v;
          break;
        }
    if (view)
      os << " of " << view.getType();
    os << " at " << op->getLoc();
    out[key].merge(cost);
  }
  return out;
}

} // namespace

EmulatorReport mlir::nova::emulateKernel(gpu::GPUFuncOp kernel, const EmulatorLaunch &launch) {
  EmulatorReport report;
  Emulator emulator(kernel, launch, report);
  emulator.run();
  report.shared = byWhat(report.sharedByOp, /*shared=*/true);
  report.global = byWhat(report.globalByOp, /*shared=*/false);
  report.sharedByOp.clear();
  report.globalByOp.clear();
  return report;
}
