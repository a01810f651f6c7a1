// target.hpp - every fact about a device that code is compiled for.
//
// A TargetDesc is a plain value: the compiler's configurator and codegen read
// it (vector width, cores, caches, ISA features; for a GPU its multiprocessors,
// shared memory, registers, tensor-core instructions and peak rates), the
// runtime checks that an executable's target fits the machine it is loaded on,
// and its hash() is part of every on-disk cache key. It comes from the live
// machine (host_target(): cpuid-derived features from /proc/cpuinfo, caches
// from sysfs, cores from the affinity mask; cuda_device_target() in
// nova/cuda.hpp: the CUDA driver's attributes) or from a named entry
// (named_target("x86-64-v4"), named_target("sm_90a")), so code for another
// machine, a GPU included, can be compiled here. No MLIR, no LLVM.
//
// Environment (target_from_env(), what a step compiles for):
//   NOVA_TARGET=<name>     host (default), x86-64, x86-64-v2, x86-64-v3, x86-64-v4;
//                          GPUs: sm_80 (a100), sm_86 (rtx3060), sm_89 (l4),
//                          sm_90a (h100), h200, or cuda (the live device 0)
//   NOVA_NUM_THREADS=<n>   cores the code is configured for (and the pool runs)
//   NOVA_VECTOR_BITS=<b>   narrower vectors than the ISA allows (128/256/512)
//   NOVA_GPU_SMS=<n>       a GPU target's multiprocessors (fewer than the
//                          entry's: a MIG slice, a cut-down part; the compute
//                          peaks scale with them)
//   NOVA_GPU_CLUSTER=2     the wgmma matmuls in clusters of 2 CTAs along M,
//                          sharing B's tile by TMA multicast (sm_90a; 1, the
//                          default: none)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nova {

enum class DeviceKind : std::uint8_t { cpu = 0, cuda = 1 };

struct TargetDesc {
  DeviceKind kind = DeviceKind::cpu;
  /// The entry it came from: "host" or a named_target() name.
  std::string name;
  /// The machine's own words (cpuid brand string); informative, not hashed.
  std::string model;

  // --- CPU ---------------------------------------------------------------
  std::string arch = "x86_64";
  /// The ISA level code is compiled for (an LLVM CPU name): "x86-64-v4", ...
  std::string cpu = "x86-64";
  /// ISA features code may use, in /proc/cpuinfo spelling ("avx512f",
  /// "avx512_bf16", "amx_tile"), sorted. Loading checks the host has them all.
  std::vector<std::string> features;
  /// Width of the vector registers code uses: 128, 256 or 512.
  int vector_bits = 128;
  /// Vector registers per core (16 with AVX2, 32 with AVX-512).
  int vector_registers = 16;
  /// FMA pipes per core (2 on server cores) and FMA latency in cycles: the
  /// register tile must hide latency x pipes.
  int fma_units = 2;
  int fma_latency = 4;
  /// Cores code is configured for; the runtime's pool runs this many threads.
  int cores = 1;
  /// Data cache sizes in bytes: L1d and L2 per core, L3 shared (0: none).
  std::int64_t l1d_bytes = 32 * 1024;
  std::int64_t l2_bytes = 1024 * 1024;
  std::int64_t l3_bytes = 0;
  int cache_line = 64;

  // --- CUDA GPU (kind == cuda) ---------------------------------------------
  // For a GPU, `arch` is "nvptx64", `cpu` the chip code is compiled for
  // ("sm_80", "sm_90a": the 'a' allows wgmma and TMA, and such code runs only
  // on that exact architecture), `l2_bytes` the device's L2, and `features`
  // what its kernels may use: "cp.async", "ldmatrix", "mma.sync.f16",
  // "mma.sync.bf16", "mma.sync.tf32", "tma", "wgmma.f16", "wgmma.bf16",
  // "wgmma.tf32".
  /// Compute capability, major x 10 + minor (80, 86, 89, 90); 0 for a CPU.
  int compute_capability = 0;
  /// The PTX ISA version code is written in, x 10 (76 = 7.6, 80 = 8.0).
  int ptx_version = 0;
  int multiprocessors = 0;
  int warp_size = 32;
  int max_threads_per_block = 1024;
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  /// Shared memory: what a block gets without asking (the 48 KiB of static
  /// shared memory), at most with the opt-in attribute, and per multiprocessor.
  std::int64_t smem_per_block = 48 * 1024;
  std::int64_t smem_per_block_optin = 0;
  std::int64_t smem_per_sm = 0;
  /// 32-bit registers per multiprocessor, per block and per thread.
  int registers_per_sm = 65536;
  int registers_per_block = 65536;
  int registers_per_thread = 255;
  /// The clock the peak rates below are quoted at.
  int clock_mhz = 0;
  std::int64_t memory_bytes = 0;
  std::int64_t dram_gb_per_s = 0;
  /// Dense peaks, GFLOP/s: FP32 on the CUDA cores; TF32 and BF16 (= FP16) on
  /// the tensor cores with FP32 accumulation.
  std::int64_t peak_gflops_f32 = 0;
  std::int64_t peak_gflops_tf32 = 0;
  std::int64_t peak_gflops_bf16 = 0;
  /// How code is generated rather than what the device is: the CTAs a
  /// cluster the wgmma matmuls pair along M (NOVA_GPU_CLUSTER; 1: none).
  int matmul_cluster = 1;
  /// The same: the mma.sync matmuls issue each slab's refill a share at
  /// each k step (NOVA_GPU_INTERLEAVE=1; 0: all before the slab's first
  /// fragment load, the default until measured on a GPU).
  int matmul_interleave = 0;

  bool is_gpu() const { return kind == DeviceKind::cuda; }

  bool has(std::string_view feature) const;
  /// A hash of every field that can change generated code (not `model`):
  /// equal on equal machines, in every process.
  std::uint64_t hash() const;
  /// One line for logs and NOVA_EXPLAIN: "host (x86-64-v4, 512-bit, 2 cores, ...)".
  std::string describe() const;
  friend bool operator==(const TargetDesc&, const TargetDesc&) = default;
};

/// The machine this process runs on; NOVA_NUM_THREADS sets `cores`.
TargetDesc host_target();
/// A built-in entry ("x86-64-v4", ...); throws nova::Error naming the known ones.
TargetDesc named_target(std::string_view name);
/// The built-in GPU entry `name` ("sm_80", ..., "h200"), or a TargetDesc
/// that is not a GPU when there is none. Never throws (code built without
/// exceptions checks a name with it).
TargetDesc builtin_gpu_target(std::string_view name);
std::vector<std::string> known_targets();
/// NOVA_TARGET (default "host") with the NOVA_NUM_THREADS / NOVA_VECTOR_BITS
/// (CPU) or NOVA_GPU_SMS / NOVA_GPU_CLUSTER (GPU) overrides: what steps compile for now. Read
/// on each call (cheap).
TargetDesc target_from_env();
/// Features `needed` uses that `machine` lacks (empty: code for `needed` runs
/// on `machine`). For GPUs also a compute capability too low, or, for code
/// built for an arch-specific chip (sm_90a), any other architecture.
std::vector<std::string> missing_features(const TargetDesc& needed, const TargetDesc& machine);
/// What makes code for `needed` slower on `machine`, where it runs (empty:
/// nothing known): a GPU with fewer multiprocessors than the code was
/// configured for, whose launches of one block an SM (persistent matmuls)
/// then leave blocks for a second round.
std::vector<std::string> fit_warnings(const TargetDesc& needed, const TargetDesc& machine);

/// Threads the runtime may use: NOVA_NUM_THREADS, else the cores this
/// process may run on.
int default_thread_count();

} // namespace nova
