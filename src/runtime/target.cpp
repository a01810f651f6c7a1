// target.cpp - host detection and the built-in target table.
//
// Host facts come from the OS, not from LLVM, so the MLIR-free runtime can
// check an executable against the machine: ISA features from the "flags" line
// of /proc/cpuinfo (the kernel's cpuid view, already filtered by what the OS
// enables, e.g. AVX-512 state saving), cache sizes from
// /sys/devices/system/cpu/cpu0/cache, cores from the affinity mask. The ISA
// level (x86-64-v2/v3/v4) is derived from the features, as in the x86-64 psABI.
#include "nova/target.hpp"

#include <sched.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include "nova/cuda.hpp"
#include "nova/error.hpp"
#include "env_bytes.hpp"
#include "gpu_target.hpp"

namespace nova {
namespace {

// The features each psABI level requires, in /proc/cpuinfo spelling
// ("pni" is SSE3, "abm" is LZCNT).
const std::vector<std::string> kV2 = {"cx16", "lahf_lm", "pni", "popcnt", "sse4_1", "sse4_2", "ssse3"};
const std::vector<std::string> kV3 = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"};
const std::vector<std::string> kV4 = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"};
// Beyond v4, features code may use explicitly (bf16 and AMX kernels).
const std::vector<std::string> kExtra = {"avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni",
                                         "amx_tile", "amx_bf16", "amx_int8"};

bool has_all(const std::vector<std::string>& have, const std::vector<std::string>& want) {
  return std::all_of(want.begin(), want.end(), [&](const std::string& f) {
    return std::find(have.begin(), have.end(), f) != have.end();
  });
}

std::vector<std::string> level_features(int level) {
  std::vector<std::string> f = {"sse2"};
  if (level >= 2) f.insert(f.end(), kV2.begin(), kV2.end());
  if (level >= 3) f.insert(f.end(), kV3.begin(), kV3.end());
  if (level >= 4) f.insert(f.end(), kV4.begin(), kV4.end());
  std::sort(f.begin(), f.end());
  return f;
}

void set_level(TargetDesc& t, int level) {
  t.cpu = level <= 1 ? "x86-64" : "x86-64-v" + std::to_string(level);
  t.vector_bits = level >= 4 ? 512 : level >= 3 ? 256 : 128;
  t.vector_registers = level >= 4 ? 32 : 16;
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// "48K" / "2048K" / "32M" (sysfs cache size) in bytes; 0 if unreadable.
std::int64_t parse_size(const std::string& s) {
  if (s.empty()) return 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (end && (*end == 'K' || *end == 'k')) v *= 1024;
  else if (end && (*end == 'M' || *end == 'm')) v *= 1024 * 1024;
  return v;
}

struct HostFacts {
  TargetDesc desc;
  int cores = 1;
};

HostFacts detect_host() {
  HostFacts h;
  TargetDesc& t = h.desc;
  t.name = "host";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::vector<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && t.model.empty()) t.model = value;
    if (key == "flags" && flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;) flags.push_back(w);
    }
  }
  int level = 1;
  if (has_all(flags, kV2)) level = 2;
  if (level == 2 && has_all(flags, kV3)) level = 3;
  if (level == 3 && has_all(flags, kV4)) level = 4;
  set_level(t, level);
  t.features = level_features(level);
  for (const auto& f : kExtra)
    if (std::find(flags.begin(), flags.end(), f) != flags.end()) t.features.push_back(f);
  std::sort(t.features.begin(), t.features.end());

  for (int i = 0; i < 8; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::string type = read_first_line(dir + "type");
    if (type.empty()) break;
    int lvl = std::atoi(read_first_line(dir + "level").c_str());
    std::int64_t size = parse_size(read_first_line(dir + "size"));
    if (size <= 0) continue;
    if (lvl == 1 && type == "Data") t.l1d_bytes = size;
    if (lvl == 2 && type != "Instruction") t.l2_bytes = size;
    if (lvl == 3 && type != "Instruction") t.l3_bytes = size;
    int line_size = std::atoi(read_first_line(dir + "coherency_line_size").c_str());
    if (line_size > 0) t.cache_line = line_size;
  }

  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) h.cores = std::max(1, CPU_COUNT(&set));
  else h.cores = std::max(1u, std::thread::hardware_concurrency());
  t.cores = h.cores;
  return h;
}

const HostFacts& host_facts() {
  static const HostFacts facts = detect_host();
  return facts;
}

TargetDesc table_entry(int level, std::string name) {
  TargetDesc t;
  t.name = std::move(name);
  t.model = "built-in entry";
  set_level(t, level);
  t.features = level_features(level);
  // A typical server core of that generation; cores follow this machine (a
  // config for more cores than exist still runs correctly).
  t.l1d_bytes = level >= 4 ? 48 * 1024 : 32 * 1024;
  t.l2_bytes = level >= 4 ? 2 * 1024 * 1024 : 1024 * 1024;
  t.l3_bytes = 32ll * 1024 * 1024;
  t.cores = host_facts().cores;
  return t;
}

} // namespace

TargetDesc gpu_target(int compute_capability, std::string name, std::string model, int multiprocessors,
                      int clock_mhz, bool half_rate_accumulate) {
  TargetDesc t;
  t.kind = DeviceKind::cuda;
  t.name = std::move(name);
  t.model = std::move(model);
  t.arch = "nvptx64";
  t.compute_capability = compute_capability;
  // Hopper's wgmma and TMA exist only in arch-specific code (sm_90a).
  t.cpu = "sm_" + std::to_string(compute_capability) + (compute_capability == 90 ? "a" : "");
  t.ptx_version = compute_capability >= 90 ? 80 : compute_capability >= 89 ? 78 : 76;
  t.vector_bits = 128; // the widest global/shared access: 16 bytes a thread
  t.vector_registers = 0;
  t.fma_units = 0;
  t.fma_latency = 0;
  t.cores = 1;
  t.l1d_bytes = 0;
  t.l3_bytes = 0;
  t.cache_line = 128;
  if (compute_capability >= 80)
    t.features = {"cp.async", "ldmatrix", "mma.sync.bf16", "mma.sync.f16", "mma.sync.tf32"};
  if (compute_capability == 90)
    for (const char* f : {"tma", "wgmma.bf16", "wgmma.f16", "wgmma.tf32"}) t.features.push_back(f);
  std::sort(t.features.begin(), t.features.end());
  // Per multiprocessor and clock (CUDA Programming Guide, arithmetic
  // instructions; the A100/H100 whitepapers): FP32 lanes x 2, and the dense
  // tensor-core BF16 rate with FP32 accumulation (TF32: half of it). GeForce
  // Ampere/Ada cards accumulate in FP32 at half the rate.
  const int f32_per_clock = compute_capability == 80 ? 128 : 256;
  int bf16_per_clock = compute_capability >= 90 ? 4096 : compute_capability == 80 ? 2048 : 1024;
  if (half_rate_accumulate) bf16_per_clock /= 2;
  t.multiprocessors = multiprocessors;
  t.clock_mhz = clock_mhz;
  const std::int64_t sm_mhz = std::int64_t(multiprocessors) * clock_mhz;
  t.peak_gflops_f32 = sm_mhz * f32_per_clock / 1000;
  t.peak_gflops_bf16 = sm_mhz * bf16_per_clock / 1000;
  t.peak_gflops_tf32 = t.peak_gflops_bf16 / 2;
  // Compute capability tables of the CUDA Programming Guide.
  const bool big = compute_capability == 80 || compute_capability >= 90;
  t.max_threads_per_sm = big ? 2048 : 1536;
  t.max_blocks_per_sm = big ? 32 : compute_capability == 89 ? 24 : 16;
  t.smem_per_block = 48 * 1024;
  t.smem_per_sm = (compute_capability >= 90 ? 228 : compute_capability == 80 ? 164 : 100) * 1024;
  t.smem_per_block_optin = t.smem_per_sm - 1024; // 1 KiB per block is the system's
  return t;
}

// gpu_fields and set_gpu_fields list the same fields in the same order.
std::vector<std::int64_t> gpu_fields(const TargetDesc& t) {
  return {t.compute_capability, t.ptx_version, t.multiprocessors, t.warp_size,
          t.max_threads_per_block, t.max_threads_per_sm, t.max_blocks_per_sm, t.smem_per_block,
          t.smem_per_block_optin, t.smem_per_sm, t.registers_per_sm, t.registers_per_block,
          t.registers_per_thread, t.clock_mhz, t.memory_bytes, t.dram_gb_per_s,
          t.peak_gflops_f32, t.peak_gflops_tf32, t.peak_gflops_bf16, t.matmul_cluster, t.matmul_interleave};
}

void set_gpu_fields(TargetDesc& t, const std::vector<std::int64_t>& v) {
  std::size_t i = 0;
  auto next = [&] { return i < v.size() ? v[i++] : 0; };
  t.compute_capability = int(next());
  t.ptx_version = int(next());
  t.multiprocessors = int(next());
  t.warp_size = int(next());
  t.max_threads_per_block = int(next());
  t.max_threads_per_sm = int(next());
  t.max_blocks_per_sm = int(next());
  t.smem_per_block = next();
  t.smem_per_block_optin = next();
  t.smem_per_sm = next();
  t.registers_per_sm = int(next());
  t.registers_per_block = int(next());
  t.registers_per_thread = int(next());
  t.clock_mhz = int(next());
  t.memory_bytes = next();
  t.dram_gb_per_s = next();
  t.peak_gflops_f32 = next();
  t.peak_gflops_tf32 = next();
  t.peak_gflops_bf16 = next();
  t.matmul_cluster = int(std::max<std::int64_t>(1, next()));
  t.matmul_interleave = int(next());
}

namespace {

/// The built-in GPUs: the chips' documented configurations (the clock is the
/// one NVIDIA's dense tensor peaks are quoted at).
TargetDesc gpu_entry(std::string_view name) {
  auto with = [](TargetDesc t, std::int64_t l2_mib, std::int64_t memory_gib, std::int64_t dram) {
    t.l2_bytes = l2_mib * 1024 * 1024;
    t.memory_bytes = memory_gib * 1024 * 1024 * 1024;
    t.dram_gb_per_s = dram;
    return t;
  };
  if (name == "sm_80" || name == "a100")
    return with(gpu_target(80, std::string(name), "A100 SXM4 80GB, built-in entry", 108, 1410, false), 40, 80, 2039);
  if (name == "sm_86" || name == "rtx3060")
    return with(gpu_target(86, std::string(name), "GeForce RTX 3060, built-in entry", 28, 1777, true), 3, 12, 360);
  if (name == "sm_89" || name == "l4")
    return with(gpu_target(89, std::string(name), "L4, built-in entry", 58, 2040, false), 48, 24, 300);
  if (name == "sm_90a" || name == "h100")
    return with(gpu_target(90, std::string(name), "H100 SXM5 80GB, built-in entry", 132, 1830, false), 50, 80, 3350);
  if (name == "h200")
    return with(gpu_target(90, std::string(name), "H200 SXM 141GB, built-in entry", 132, 1830, false), 50, 141, 4800);
  return {};
}

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  // FNV-1a over the value's bytes: stable across processes and builds.
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::uint64_t mix(std::uint64_t h, std::string_view s) {
  h = mix(h, static_cast<std::uint64_t>(s.size()));
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : 0;
}

} // namespace

bool TargetDesc::has(std::string_view feature) const {
  return std::find(features.begin(), features.end(), feature) != features.end();
}

std::uint64_t TargetDesc::hash() const {
  std::uint64_t h = 0xcbf29ce484222325ull;
  h = mix(h, static_cast<std::uint64_t>(kind));
  h = mix(h, name);
  h = mix(h, arch);
  h = mix(h, cpu);
  h = mix(h, static_cast<std::uint64_t>(features.size()));
  for (const auto& f : features) h = mix(h, f);
  for (std::int64_t v : {std::int64_t(vector_bits), std::int64_t(vector_registers),
                         std::int64_t(fma_units), std::int64_t(fma_latency), std::int64_t(cores),
                         l1d_bytes, l2_bytes, l3_bytes, std::int64_t(cache_line)})
    h = mix(h, static_cast<std::uint64_t>(v));
  for (std::int64_t v : gpu_fields(*this)) h = mix(h, static_cast<std::uint64_t>(v));
  return h;
}

std::string TargetDesc::describe() const {
  auto kib = [](std::int64_t b) { return std::to_string(b / 1024) + " KiB"; };
  if (is_gpu()) {
    std::string s = name + " (" + cpu + ", compute capability " + std::to_string(compute_capability / 10) +
                    "." + std::to_string(compute_capability % 10) + ", " + std::to_string(multiprocessors) +
                    " SMs at " + std::to_string(clock_mhz) + " MHz, shared memory " + kib(smem_per_block_optin) +
                    " a block / " + kib(smem_per_sm) + " an SM, L2 " + kib(l2_bytes) + ", peak " +
                    std::to_string(peak_gflops_bf16 / 1000) + " TFLOP/s bf16, " +
                    std::to_string(peak_gflops_tf32 / 1000) + " tf32, " + std::to_string(dram_gb_per_s) + " GB/s";
    if (memory_bytes > 0) {
      char gib[32];
      std::snprintf(gib, sizeof gib, "%.1f", static_cast<double>(memory_bytes) / (1 << 30));
      s += ", " + std::string(gib) + " GiB of memory";
    }
    if (matmul_cluster > 1) s += ", wgmma matmuls in clusters of " + std::to_string(matmul_cluster);
    if (matmul_interleave) s += ", mma.sync refills interleaved with the k steps";
    if (!model.empty()) s += ", " + model;
    return s + ")";
  }
  std::string s = name + " (" + cpu + ", " + std::to_string(vector_bits) + "-bit vectors, " +
                  std::to_string(cores) + (cores == 1 ? " core" : " cores") + ", L1d " +
                  kib(l1d_bytes) + ", L2 " + kib(l2_bytes) + ", L3 " + kib(l3_bytes);
  if (!model.empty()) s += ", " + model;
  return s + ")";
}

TargetDesc host_target() { return host_facts().desc; }

TargetDesc builtin_gpu_target(std::string_view name) { return gpu_entry(name); }

std::vector<std::string> known_targets() {
  return {"host", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "sm_80", "a100",
          "sm_86", "rtx3060", "sm_89", "l4", "sm_90a", "h100", "h200", "cuda"};
}

TargetDesc named_target(std::string_view name) {
  if (name == "host" || name.empty()) return host_target();
  if (name == "cuda") return cuda_device_target(); // this process's GPU (cuda_device())
  if (TargetDesc gpu = gpu_entry(name); gpu.is_gpu()) return gpu;
  if (name == "x86-64") return table_entry(1, "x86-64");
  if (name == "x86-64-v2") return table_entry(2, "x86-64-v2");
  if (name == "x86-64-v3") return table_entry(3, "x86-64-v3");
  if (name == "x86-64-v4") return table_entry(4, "x86-64-v4");
  std::string known;
  for (const auto& k : known_targets()) known += (known.empty() ? "" : ", ") + k;
  throw Error("nova: unknown target '" + std::string(name) + "' (NOVA_TARGET); known targets: " + known);
}

TargetDesc target_from_env() {
  const char* name = std::getenv("NOVA_TARGET");
  TargetDesc t = named_target(name ? name : "host");
  if (t.is_gpu()) {
    // Fewer multiprocessors (a MIG slice, a part with SMs fused off): the
    // configurator's waves, and the compute peaks, follow them; DRAM stays.
    if (const char* v = std::getenv("NOVA_GPU_SMS"); v && *v) {
      const int sms = env_int("NOVA_GPU_SMS");
      if (sms < 1 || sms > t.multiprocessors)
        throw Error("nova: NOVA_GPU_SMS must be 1 to " + std::to_string(t.multiprocessors) + " for " + t.name +
                    ", not '" + v + "'");
      auto scaled = [&](std::int64_t peak) { return peak * sms / t.multiprocessors; };
      t.peak_gflops_f32 = scaled(t.peak_gflops_f32);
      t.peak_gflops_tf32 = scaled(t.peak_gflops_tf32);
      t.peak_gflops_bf16 = scaled(t.peak_gflops_bf16);
      t.multiprocessors = sms;
    }
    // Less device memory (a MIG slice, a GPU shared with other processes):
    // the compiler's default arena budget for the step follows it.
    if (const std::uint64_t bytes = detail::bytes_from_env("NOVA_GPU_MEMORY")) {
      if (t.memory_bytes > 0 && bytes > static_cast<std::uint64_t>(t.memory_bytes))
        throw Error("nova: NOVA_GPU_MEMORY must be at most the " + std::to_string(t.memory_bytes) + " bytes of " +
                    t.name + ", not '" + std::getenv("NOVA_GPU_MEMORY") + "'");
      t.memory_bytes = static_cast<std::int64_t>(bytes);
    }
    if (const char* v = std::getenv("NOVA_GPU_CLUSTER"); v && *v) {
      const int cluster = env_int("NOVA_GPU_CLUSTER");
      if (cluster != 1 && cluster != 2)
        throw Error(std::string("nova: NOVA_GPU_CLUSTER must be 1 or 2 (CTAs a cluster of the wgmma matmuls), not '") +
                    v + "'");
      if (cluster > 1 && !t.has("wgmma.bf16"))
        throw Error("nova: NOVA_GPU_CLUSTER=2 pairs the wgmma matmuls in clusters; " + t.name +
                    " has no wgmma (sm_90a)");
      t.matmul_cluster = cluster;
    }
    if (const char* v = std::getenv("NOVA_GPU_INTERLEAVE"); v && *v) {
      const std::string interleave = v;
      if (interleave != "0" && interleave != "1")
        throw Error(std::string("nova: NOVA_GPU_INTERLEAVE must be 0 or 1 (the mma.sync matmuls' refill spread over "
                                "the k steps), not '") +
                    v + "'");
      t.matmul_interleave = interleave == "1";
    }
    return t; // the CPU overrides below do not apply
  }
  if (int n = env_int("NOVA_NUM_THREADS"); n > 0) t.cores = n;
  if (int bits = env_int("NOVA_VECTOR_BITS"); bits > 0) {
    if (bits != 128 && bits != 256 && bits != 512)
      throw Error("nova: NOVA_VECTOR_BITS must be 128, 256 or 512, not " + std::to_string(bits));
    t.vector_bits = std::min(t.vector_bits, bits);
  }
  return t;
}

std::vector<std::string> fit_warnings(const TargetDesc& needed, const TargetDesc& machine) {
  std::vector<std::string> notes;
  if (needed.is_gpu() && machine.is_gpu() && machine.multiprocessors > 0 &&
      machine.multiprocessors < needed.multiprocessors)
    notes.push_back("configured for " + std::to_string(needed.multiprocessors) + " SMs (" + needed.name +
                    "), this GPU has " + std::to_string(machine.multiprocessors) +
                    ": launches of a block an SM (persistent matmuls) leave blocks for a second round; "
                    "compile for this GPU with NOVA_TARGET=cuda, or NOVA_GPU_SMS=" +
                    std::to_string(machine.multiprocessors));
  return notes;
}

std::vector<std::string> missing_features(const TargetDesc& needed, const TargetDesc& machine) {
  std::vector<std::string> missing;
  if (needed.kind != machine.kind) return {"a " + std::string(needed.kind == DeviceKind::cpu ? "CPU" : "CUDA") + " device"};
  auto cc = [](int c) { return std::to_string(c / 10) + "." + std::to_string(c % 10); };
  if (needed.is_gpu() && needed.compute_capability > machine.compute_capability)
    missing.push_back("compute capability " + cc(needed.compute_capability) + " (this GPU has " +
                      cc(machine.compute_capability) + ")");
  else if (needed.is_gpu() && !needed.cpu.empty() && needed.cpu.back() == 'a' &&
           needed.compute_capability != machine.compute_capability)
    missing.push_back("exactly compute capability " + cc(needed.compute_capability) + " (code for " + needed.cpu +
                      " is arch-specific; this GPU has " + cc(machine.compute_capability) + ")");
  for (const auto& f : needed.features)
    if (!machine.has(f)) missing.push_back(f);
  return missing;
}

int default_thread_count() {
  if (int n = env_int("NOVA_NUM_THREADS"); n > 0) return n;
  return host_facts().cores;
}

} // namespace nova

namespace nova {

std::uint64_t current_target_hash() {
  // The variables target_from_env() reads; per thread, the hash is derived
  // again only when one of them changes.
  static constexpr std::array<std::string_view, 8> kNames{"NOVA_GPU",         "NOVA_TARGET",      "NOVA_NUM_THREADS",
                                                          "NOVA_VECTOR_BITS", "NOVA_GPU_SMS",     "NOVA_GPU_CLUSTER",
                                                          "NOVA_GPU_INTERLEAVE", "NOVA_GPU_MEMORY"};
  constexpr std::size_t kGpu = 0; // NOVA_GPU=emulate: another executable (below)
  static_assert(kNames[kGpu] == "NOVA_GPU");
  struct Cached {
    bool valid = false;
    std::array<std::string, kNames.size()> values;
    std::uint64_t hash = 0;
  };
  thread_local Cached cached;
  std::array<std::string, kNames.size()> values;
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (const char* v = std::getenv(kNames[i].data())) values[i] = v;
  if (!cached.valid || values != cached.values) {
    TargetDesc t = target_from_env();
    // A GPU step run by the emulator (NOVA_GPU=emulate) is another executable.
    std::uint64_t emulated = t.is_gpu() && values[kGpu] == "emulate" ? 0x656d756c61746564ull : 0;
    cached = {true, std::move(values), t.hash() ^ emulated};
  }
  return cached.hash;
}

} // namespace nova
