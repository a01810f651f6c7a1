// target.hpp - every fact about a device that code is compiled for.
//
// A TargetDesc is a plain value: the compiler's configurator and codegen read
// it (vector width, cores, caches, ISA features), the runtime checks that an
// executable's target fits the machine it is loaded on, and its hash() is part
// of every on-disk cache key. It comes from the live machine (host_target():
// cpuid-derived features from /proc/cpuinfo, caches from sysfs, cores from the
// affinity mask) or from a named entry (named_target("x86-64-v4")), so code
// for another machine can be compiled here. No MLIR, no LLVM.
//
// Environment (target_from_env(), what a step compiles for):
//   NOVA_TARGET=<name>     host (default), x86-64, x86-64-v2, x86-64-v3, x86-64-v4
//   NOVA_NUM_THREADS=<n>   cores the code is configured for (and the pool runs)
//   NOVA_VECTOR_BITS=<b>   narrower vectors than the ISA allows (128/256/512)
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
std::vector<std::string> known_targets();
/// NOVA_TARGET (default "host") with the NOVA_NUM_THREADS / NOVA_VECTOR_BITS
/// overrides: what steps compile for now. Read on each call (cheap).
TargetDesc target_from_env();
/// Features `needed` uses that `machine` lacks (empty: code for `needed` runs
/// on `machine`).
std::vector<std::string> missing_features(const TargetDesc& needed, const TargetDesc& machine);

/// Threads the runtime may use: NOVA_NUM_THREADS, else the cores this
/// process may run on.
int default_thread_count();

} // namespace nova
