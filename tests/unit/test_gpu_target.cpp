// test_gpu_target.cpp - GPU target descriptions: the built-in table against
// NVIDIA's published figures, hashing and serialization, what code for one
// GPU needs of another, and the live-device path through the CUDA driver,
// run against a fake driver (no GPU here) and against none.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nova/cuda.hpp"
#include "nova/distributed.hpp"
#include "nova/error.hpp"
#include "nova/executable_desc.hpp"
#include "nova/profile.hpp"
#include "nova/target.hpp"
#include "nova/timeline.hpp"
#include "nova/tensor.hpp"
#include "captured_stderr.hpp"
#include "scoped_env.hpp"

#include <cstddef>

#if defined(NOVA_HAVE_CUDA_H)
#include <cuda.h>
#include "../../src/runtime/cuda_driver.hpp"
// The runtime writes the driver's enum values out; they must be cuda.h's.
static_assert(int(nova::cuda::kMultiprocessorCount) == int(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
static_assert(int(nova::cuda::kMaxSharedMemoryPerBlockOptin) == int(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
static_assert(int(nova::cuda::kMaxSharedMemoryPerMultiprocessor) == int(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
static_assert(int(nova::cuda::kMaxRegistersPerMultiprocessor) == int(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR));
static_assert(int(nova::cuda::kMaxBlocksPerMultiprocessor) == int(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR));
static_assert(int(nova::cuda::kComputeCapabilityMajor) == int(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
static_assert(int(nova::cuda::kComputeCapabilityMinor) == int(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
static_assert(int(nova::cuda::kClockRate) == int(CU_DEVICE_ATTRIBUTE_CLOCK_RATE));
static_assert(int(nova::cuda::kMemoryClockRate) == int(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE));
static_assert(int(nova::cuda::kGlobalMemoryBusWidth) == int(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH));
static_assert(int(nova::cuda::kL2CacheSize) == int(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
static_assert(int(nova::cuda::kMaxThreadsPerMultiprocessor) == int(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR));
static_assert(int(nova::cuda::kMaxThreadsPerBlock) == int(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
static_assert(int(nova::cuda::kMaxSharedMemoryPerBlock) == int(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
static_assert(int(nova::cuda::kMaxRegistersPerBlock) == int(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK));
static_assert(int(nova::cuda::kWarpSize) == int(CU_DEVICE_ATTRIBUTE_WARP_SIZE));
static_assert(nova::cuda::kFuncMaxDynamicSharedSizeBytes == int(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES));
static_assert(sizeof(nova::cuda::CUdeviceptr) == sizeof(CUdeviceptr));
static_assert(nova::cuda::kLaunchAttributeClusterDimension == int(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION));
static_assert(sizeof(nova::cuda::LaunchAttribute) == sizeof(CUlaunchAttribute) &&
              offsetof(nova::cuda::LaunchAttribute, value) == offsetof(CUlaunchAttribute, value));
static_assert(sizeof(nova::cuda::LaunchConfig) == sizeof(CUlaunchConfig) &&
              offsetof(nova::cuda::LaunchConfig, stream) == offsetof(CUlaunchConfig, hStream) &&
              offsetof(nova::cuda::LaunchConfig, attributes) == offsetof(CUlaunchConfig, attrs) &&
              offsetof(nova::cuda::LaunchConfig, attribute_count) == offsetof(CUlaunchConfig, numAttrs));
static_assert(nova::cuda::kTensorMapFloat32 == int(CU_TENSOR_MAP_DATA_TYPE_FLOAT32) &&
              nova::cuda::kTensorMapFloat64 == int(CU_TENSOR_MAP_DATA_TYPE_FLOAT64) &&
              nova::cuda::kTensorMapInt32 == int(CU_TENSOR_MAP_DATA_TYPE_INT32) &&
              nova::cuda::kTensorMapInt64 == int(CU_TENSOR_MAP_DATA_TYPE_INT64));
static_assert(nova::cuda::kCaptureModeThreadLocal == int(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
static_assert(nova::cuda::kEventDisableTiming == unsigned(CU_EVENT_DISABLE_TIMING));
#include <nccl.h>
#include "../../src/runtime/nccl.hpp"
static_assert(nova::nccl::kFloat32 == int(ncclFloat32) && nova::nccl::kFloat64 == int(ncclFloat64) &&
              nova::nccl::kSum == int(ncclSum));
static_assert(sizeof(nova::nccl::UniqueId) == sizeof(ncclUniqueId));
static_assert(nova::cuda::kTensorMapL2Promotion128B == int(CU_TENSOR_MAP_L2_PROMOTION_L2_128B));
static_assert(nova::cuda::tensor_map_swizzle(128) == int(CU_TENSOR_MAP_SWIZZLE_128B) &&
              nova::cuda::tensor_map_swizzle(64) == int(CU_TENSOR_MAP_SWIZZLE_64B) &&
              nova::cuda::tensor_map_swizzle(32) == int(CU_TENSOR_MAP_SWIZZLE_32B) &&
              nova::cuda::tensor_map_swizzle(0) == int(CU_TENSOR_MAP_SWIZZLE_NONE));
#endif

namespace {

bool near(double got, double want, double rel) { return std::abs(got - want) <= rel * want; }

} // namespace

TEST_CASE("GPU targets: the built-in table matches NVIDIA's published dense peaks and limits") {
  struct Published {
    const char* name;
    int cc;
    const char* chip;
    int sms;
    double bf16_tflops, tf32_tflops;
    std::int64_t smem_optin_kib;
  };
  // A100 SXM4 and H100 SXM5 datasheets (dense, FP32 accumulate); RTX 3060 and
  // L4 from their whitepapers' per-SM rates (notes/mlir19-gpu.md §4).
  for (const Published& p : {Published{"sm_80", 80, "sm_80", 108, 312, 156, 163},
                             Published{"a100", 80, "sm_80", 108, 312, 156, 163},
                             Published{"sm_86", 86, "sm_86", 28, 25.5, 12.7, 99},
                             Published{"sm_89", 89, "sm_89", 58, 121, 60.5, 99},
                             Published{"sm_90a", 90, "sm_90a", 132, 989, 494.7, 227},
                             Published{"h200", 90, "sm_90a", 132, 989, 494.7, 227}}) {
    CAPTURE(p.name);
    nova::TargetDesc t = nova::named_target(p.name);
    CHECK(t.is_gpu());
    CHECK(t.compute_capability == p.cc);
    CHECK(t.cpu == p.chip);
    CHECK(t.arch == "nvptx64");
    CHECK(t.multiprocessors == p.sms);
    CHECK(near(double(t.peak_gflops_bf16) / 1000, p.bf16_tflops, 0.01));
    CHECK(near(double(t.peak_gflops_tf32) / 1000, p.tf32_tflops, 0.01));
    CHECK(t.smem_per_block_optin == p.smem_optin_kib * 1024);
    CHECK(t.smem_per_block == 48 * 1024);
    CHECK(t.smem_per_block_optin < t.smem_per_sm);
    CHECK(t.warp_size == 32);
    CHECK(t.registers_per_thread == 255);
    CHECK(t.has("mma.sync.bf16"));
    CHECK(t.has("cp.async"));
    CHECK(t.has("wgmma.bf16") == (p.cc == 90));
    CHECK(t.has("tma") == (p.cc == 90));
    CHECK(t.describe().find(std::string(t.cpu)) != std::string::npos);
  }
  CHECK(nova::named_target("h200").dram_gb_per_s == 4800);
  CHECK(nova::named_target("h100").dram_gb_per_s == 3350);
}

TEST_CASE("GPU targets: hashes, NOVA_TARGET, and what code for one GPU needs of another") {
  nova::TargetDesc a100 = nova::named_target("sm_80"), h100 = nova::named_target("sm_90a"),
                   h200 = nova::named_target("h200"), rtx = nova::named_target("sm_86");
  CHECK(a100.hash() != h100.hash());
  CHECK(h100.hash() != h200.hash()); // other bandwidth: other decisions may follow
  CHECK(h100.hash() == nova::named_target("sm_90a").hash());
  // sm_80 code runs on any later GPU; sm_90a code only on compute capability 9.0.
  CHECK(nova::missing_features(a100, h100).empty());
  CHECK(nova::missing_features(rtx, nova::named_target("sm_89")).empty());
  auto missing = nova::missing_features(h100, a100);
  REQUIRE_FALSE(missing.empty());
  CHECK(missing[0].find("compute capability 9.0") != std::string::npos);
  nova::TargetDesc future = h100;
  future.compute_capability = 100;
  missing = nova::missing_features(h100, future);
  REQUIRE_FALSE(missing.empty());
  CHECK(missing[0].find("arch-specific") != std::string::npos);
  CHECK_FALSE(nova::missing_features(a100, nova::host_target()).empty());
  {
    nova_test::Env env;
    env.set("NOVA_TARGET", "sm_90a");
    env.set("NOVA_NUM_THREADS", "3"); // a CPU setting: no effect on a GPU target
    CHECK(nova::target_from_env() == h100);
    // NOVA_GPU_SMS: fewer SMs, the compute peaks in proportion, another hash.
    env.set("NOVA_GPU_SMS", "66");
    nova::TargetDesc half = nova::target_from_env();
    CHECK(half.multiprocessors == 66);
    CHECK(half.peak_gflops_bf16 == h100.peak_gflops_bf16 / 2);
    CHECK(half.dram_gb_per_s == h100.dram_gb_per_s);
    CHECK(half.hash() != h100.hash());
    for (const char* bad : {"0", "133", "x"}) {
      env.set("NOVA_GPU_SMS", bad);
      CHECK_THROWS_WITH_AS(nova::target_from_env(), doctest::Contains("NOVA_GPU_SMS must be 1 to 132"), nova::Error);
    }
    // Code configured for 132 SMs runs on 66, slower: a note saying how to
    // configure for them; none the other way, none for the same count.
    std::vector<std::string> notes = nova::fit_warnings(h100, half);
    REQUIRE(notes.size() == 1);
    CHECK(notes[0].find("configured for 132 SMs (sm_90a), this GPU has 66") != std::string::npos);
    CHECK(notes[0].find("NOVA_GPU_SMS=66") != std::string::npos);
    CHECK(nova::fit_warnings(half, h100).empty());
    CHECK(nova::fit_warnings(h100, h200).empty());
    env.unset("NOVA_GPU_SMS");
    // NOVA_GPU_INTERLEAVE: how the mma.sync matmuls are generated, another hash.
    env.set("NOVA_GPU_INTERLEAVE", "1");
    nova::TargetDesc interleaved = nova::target_from_env();
    CHECK(interleaved.matmul_interleave == 1);
    CHECK(interleaved.hash() != h100.hash());
    CHECK(interleaved.describe().find("mma.sync refills interleaved with the k steps") != std::string::npos);
    env.set("NOVA_GPU_INTERLEAVE", "0");
    CHECK(nova::target_from_env() == h100);
    for (const char* bad : {"2", "x"}) {
      env.set("NOVA_GPU_INTERLEAVE", bad);
      CHECK_THROWS_WITH_AS(nova::target_from_env(), doctest::Contains("NOVA_GPU_INTERLEAVE must be 0 or 1"),
                           nova::Error);
    }
  }
}

TEST_CASE("GPU targets: an executable description keeps every GPU field") {
  nova::ExecutableDesc d;
  d.target = nova::named_target("h200");
  d.target.matmul_interleave = 1;
  d.compiler_version = nova::compiler_version();
  nova::ExecutableDesc back = nova::ExecutableDesc::deserialize(d.serialize());
  CHECK(back.target == d.target);
  CHECK(back.target.hash() == d.target.hash());
}

TEST_CASE("the CUDA driver: absent, present without a GPU, and a (fake) H200") {
  {
    nova_test::Env env;
    env.set("NOVA_CUDA_DRIVER", "/nonexistent/libcuda.so.1");
    std::string why;
    CHECK_FALSE(nova::cuda_available(&why));
    CHECK(why.find("no CUDA driver") != std::string::npos);
    CHECK(nova::cuda_device_count() == 0);
    CHECK_THROWS_WITH_AS(nova::cuda_device_target(0), doctest::Contains("a CUDA GPU was asked for"),
                         nova::Error);
    env.set("NOVA_TARGET", "cuda");
    CHECK_THROWS_WITH_AS(nova::target_from_env(), doctest::Contains("no CUDA driver"), nova::Error);
  }
  {
    nova_test::Env env;
    env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA_NO_DEVICE);
    std::string why;
    CHECK_FALSE(nova::cuda_available(&why));
    CHECK(why.find("CUDA_ERROR_NO_DEVICE") != std::string::npos);
    CHECK_THROWS_WITH_AS(nova::cuda_device_target(0), doctest::Contains("did not initialize"), nova::Error);
  }
  {
    nova_test::Env env;
    env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
    std::string why;
    CHECK(nova::cuda_available(&why));
    CHECK(nova::cuda_device_count() == 1);
    nova::TargetDesc t = nova::cuda_device_target(0);
    nova::TargetDesc table = nova::named_target("h200");
    CHECK(t.model == "NVIDIA H200");
    CHECK(t.cpu == "sm_90a");
    CHECK(t.compute_capability == 90);
    CHECK(t.multiprocessors == table.multiprocessors);
    CHECK(t.smem_per_block_optin == table.smem_per_block_optin);
    CHECK(t.smem_per_sm == table.smem_per_sm);
    CHECK(t.max_blocks_per_sm == table.max_blocks_per_sm);
    CHECK(t.features == table.features);
    CHECK(t.l2_bytes == 60 * 1024 * 1024);
    CHECK(near(double(t.dram_gb_per_s), 4800, 0.03)); // 3.201 GHz x 6144 bits x 2
    CHECK(t.clock_mhz == 1980);
    CHECK(nova::missing_features(table, t).empty());
    CHECK_THROWS_WITH_AS(nova::cuda_device_target(1), doctest::Contains("reports 1 GPU"), nova::Error);
    env.set("NOVA_TARGET", "cuda");
    CHECK(nova::target_from_env().cpu == "sm_90a");
  }
}

namespace {

/// A plan for the fake driver's two kernels (fake_cuda_driver.c), one float a
/// thread: out = in + 1 through the arena, and a parameter updated in place.
nova::ExecutableDesc fake_gpu_plan(std::int64_t n) {
  using nova::BufferRef;
  nova::ExecutableDesc d;
  d.compiler_version = nova::compiler_version();
  d.target = nova::named_target("h200");
  d.inputs = {{nova::DType::f32, {n}}, {nova::DType::f32, {n}}};
  d.outputs = {{nova::DType::f32, {n}}, {nova::DType::f32, {n}}};
  d.aliases = {-1, 1};
  const std::uint64_t bytes = static_cast<std::uint64_t>(n) * 4;
  d.arena_bytes = 2 * bytes;
  d.kernels = {{"nova_fake_copy", "copy", 0, 0, 32, 0}, {"nova_fake_inc", "inc", 0, 0, 32, 65536}};
  const std::uint64_t blocks = static_cast<std::uint64_t>(n) / 32;
  BufferRef in{BufferRef::Kind::input, 0, 0, bytes}, param{BufferRef::Kind::input, 1, 0, bytes};
  BufferRef tmp{BufferRef::Kind::arena, 0, bytes, bytes}, out{BufferRef::Kind::output, 0, 0, bytes};
  d.launches = {{0, blocks, {tmp, in}}, {1, blocks, {tmp}}, {0, blocks, {out, tmp}}, {1, blocks, {param}}};
  const std::string ptx = ".version 8.0\n.target sm_90a\n.entry nova_fake_copy(\n.entry nova_fake_inc(\n";
  d.object_format = "ptx";
  d.object.assign(ptx.begin(), ptx.end());
  d.validate();
  return d;
}

/// fake_gpu_plan(64) as a data-parallel step: out = the sum over the
/// ranks of (x + 1), its bucket (x + 1 in the arena) started after launch
/// 1 and waited for before launch 2; no in-place update.
nova::ExecutableDesc fake_dp_plan() {
  using nova::BufferRef;
  nova::ExecutableDesc d = fake_gpu_plan(64);
  const std::uint64_t bytes = 64 * 4;
  BufferRef in{BufferRef::Kind::input, 0, 0, bytes}, tmp{BufferRef::Kind::arena, 0, bytes, bytes},
      out{BufferRef::Kind::output, 0, 0, bytes};
  d.launches = {{0, 2, {tmp, in}}, {1, 2, {tmp}}, {0, 2, {out, tmp}}};
  nova::CollectiveDesc sum;
  sum.after_launch = 2;
  sum.before_launch = 2;
  sum.buffers = {tmp};
  d.collectives = {sum};
  d.validate();
  return d;
}

} // namespace

TEST_CASE("a GPU step whose kernel loads with TMA: the runtime encodes its tensor map over the launch's buffer") {
  using nova::BufferRef;
  nova::ExecutableDesc d;
  d.compiler_version = nova::compiler_version();
  d.target = nova::named_target("h200");
  d.inputs = {{nova::DType::f32, {8, 32}}};
  d.outputs = {{nova::DType::f32, {8, 32}}};
  d.aliases = {-1};
  nova::KernelDesc k{"nova_fake_tma_copy", "copy through a tensor map", 0, 0, 32, 0};
  nova::TensorMapDesc map;
  map.arg = 0;
  map.dims = {32, 8};
  map.strides = {128};
  map.box = {32, 8};
  map.swizzle_bytes = 128;
  k.tensor_maps = {map};
  d.kernels = {k};
  d.launches = {{0, 1, {BufferRef{BufferRef::Kind::input, 0, 0, 1024}, BufferRef{BufferRef::Kind::output, 0, 0, 1024}}}};
  const std::string ptx = ".version 8.0\n.target sm_90a\n.entry nova_fake_tma_copy(\n";
  d.object_format = "ptx";
  d.object.assign(ptx.begin(), ptx.end());
  d.validate();
  // The description round-trips with its map; a map past its buffer is refused.
  CHECK(nova::ExecutableDesc::deserialize(d.serialize()) == d);
  nova::ExecutableDesc past = d;
  past.kernels[0].tensor_maps[0].dims = {32, 9};
  CHECK_THROWS_WITH_AS(past.validate(), doctest::Contains("tensor map spans more than the 1024 bytes"),
                       nova::FormatError);
  nova::ExecutableDesc wide = d;
  wide.kernels[0].tensor_maps[0].box = {64, 8}; // 256-byte rows under a 128-byte swizzle
  CHECK_THROWS_WITH_AS(wide.validate(), doctest::Contains("a box row of 256 bytes"), nova::FormatError);
  // A map of bf16 elements (a step's bf16 operand copies): 2 bytes each, so
  // 64 of them make the 128-byte row; it round-trips; an element byte past
  // f16 is refused.
  nova::ExecutableDesc half = d;
  half.kernels[0].tensor_maps[0].element = nova::MapElement::bf16;
  half.kernels[0].tensor_maps[0].dims = {64, 8};
  half.kernels[0].tensor_maps[0].box = {64, 8};
  half.validate();
  std::vector<std::uint8_t> bytes = half.serialize();
  CHECK(nova::ExecutableDesc::deserialize(bytes) == half);
  CHECK(nova::size_of(nova::MapElement::bf16) == 2);
  nova::ExecutableDesc wider = half;
  wider.kernels[0].tensor_maps[0].box = {128, 8};
  CHECK_THROWS_WITH_AS(wider.validate(), doctest::Contains("a box row of 256 bytes"), nova::FormatError);

  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  std::shared_ptr<nova::Executable> exe = nova::load_or_describe(d);
  REQUIRE(exe->kind() == "cuda");
  std::vector<float> values(256);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(i);
  nova::Tensor x = nova::Tensor::from<float>({8, 32}, values);
  std::vector<nova::Tensor> args{x};
  std::vector<nova::Tensor> out = (*exe)(args);
  CHECK(out[0].at({0, 0}) == 0.0);
  CHECK(out[0].at({7, 31}) == 255.0);
  CHECK(out[0].at({3, 5}) == 101.0);
}

TEST_CASE("a data-parallel GPU step: its bucket summed across 2 ranks with NCCL (fake) where the plan starts it, in its CUDA graph") {
  // out = sum over ranks of (x_r + 1) only if the sum runs after the
  // increment and before the copy out (stream order), on each rank's own
  // device buffers.
  nova::ExecutableDesc d = fake_dp_plan();

  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  env.set("NOVA_NCCL_LIBRARY", NOVA_FAKE_CUDA); // the fake driver is NCCL too
  auto group = nova::dist::loopback_group(2, 30.0);
  std::vector<std::vector<nova::Tensor>> outs(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      try {
        nova::dist::set_communicator(group[static_cast<std::size_t>(r)]);
        std::shared_ptr<nova::Executable> exe = nova::load_or_describe(d);
        nova::Tensor x = nova::Tensor::full({64}, r + 1.0, nova::DType::f32);
        nova::Tensor w = nova::Tensor::full({64}, 0.0, nova::DType::f32);
        std::vector<nova::Tensor> args{x, w};
        outs[static_cast<std::size_t>(r)] = (*exe)(args);
        outs[static_cast<std::size_t>(r)] = (*exe)(args); // a second step: the same communicator
        nova::dist::set_communicator(nullptr);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    REQUIRE(errors[static_cast<std::size_t>(r)] == "");
    CHECK(outs[static_cast<std::size_t>(r)][0].at({0}) == 5.0); // (1 + 1) + (2 + 1)
    CHECK(outs[static_cast<std::size_t>(r)][0].at({63}) == 5.0);
  }
  void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(fake != nullptr);
  auto launches = reinterpret_cast<const char* (*)()>(dlsym(fake, "fake_cuda_launches"));
  // One sum a step (rank 0 logs it), each rank replaying its step's CUDA
  // graph with the sum in it. Where it ran is what the results show (after
  // the increment, before the copy out); the log interleaves the two
  // ranks' launches, so it cannot.
  std::string log = launches();
  std::size_t sums = 0;
  for (std::size_t at = log.find("allreduce(64)@"); at != std::string::npos; at = log.find("allreduce(64)@", at + 1))
    ++sums;
  CHECK(sums == 2);
  CHECK(log.find("graph;") != std::string::npos);

  // One rank: the log is in order. The sum's stream waits for the
  // increment, the sum runs there, and the launches' stream waits for it
  // before the copy out: "inc;wait@S;allreduce(64)@S;wait@L;copy", replayed
  // from the step's CUDA graph (captured at the first call, the sum in it)
  // and, with NOVA_CUDA_GRAPH=0, enqueued kernel by kernel.
  for (const char* graph : {"1", "0"}) {
    CAPTURE(graph);
    env.set("NOVA_CUDA_GRAPH", graph);
    auto one = nova::dist::loopback_group(1, 30.0);
    nova::dist::set_communicator(one[0]);
    std::shared_ptr<nova::Executable> exe = nova::load_or_describe(d);
    std::size_t before = std::string(launches()).size();
    nova::Tensor x = nova::Tensor::full({64}, 3.0, nova::DType::f32), w = nova::Tensor::full({64}, 0.0, nova::DType::f32);
    std::vector<nova::Tensor> args{x, w};
    std::vector<nova::Tensor> single = (*exe)(args);
    CHECK(single[0].at({7}) == 4.0);
    std::string run = std::string(launches()).substr(before);
    INFO(run);
    auto stream_at = [&](std::size_t at, std::size_t skip) { return run.substr(at + skip, run.find(';', at) - at - skip); };
    const std::size_t sum = run.find("allreduce(64)@"), inc = run.find("nova_fake_inc");
    REQUIRE(sum != std::string::npos);
    const std::size_t before_sum = run.find("wait@", inc), after_sum = run.find("wait@", sum);
    REQUIRE(after_sum != std::string::npos);
    CHECK(inc < before_sum);
    CHECK(before_sum < sum);
    CHECK(after_sum < run.rfind("nova_fake_copy"));
    CHECK(stream_at(before_sum, 5) == stream_at(sum, 14));
    CHECK(stream_at(after_sum, 5) != stream_at(sum, 14));
    CHECK((run.find("graph;") == 0) == (std::string(graph) == "1"));
    // A second step replays it.
    std::size_t second = std::string(launches()).size();
    single = (*exe)(args);
    CHECK(single[0].at({7}) == 4.0);
    run = std::string(launches()).substr(second);
    CHECK(run.find("allreduce(64)@") != std::string::npos);
    CHECK((run.find("graph;") == 0) == (std::string(graph) == "1"));
    nova::dist::set_communicator(nullptr);
  }
  env.unset("NOVA_CUDA_GRAPH");
  auto held = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cuda_held"));
  CHECK(held() == 0); // streams, events, NCCL communicators, modules, contexts
  dlclose(fake);

  // Without a communicator on the calling thread: a named error.
  std::shared_ptr<nova::Executable> exe = nova::load_or_describe(d);
  nova::Tensor x = nova::Tensor::full({64}, 1.0, nova::DType::f32), w = nova::Tensor::full({64}, 0.0, nova::DType::f32);
  std::vector<nova::Tensor> args{x, w};
  CHECK_THROWS_WITH_AS((*exe)(args), doctest::Contains("no communicator"), nova::DistError);
}

/// A stand-in cubin for the fake driver: a 64-bit little-endian ELF header
/// for EM_CUDA (190), then the functions' names, NUL-delimited.
static std::vector<std::uint8_t> fake_cubin(const std::vector<std::string>& functions) {
  std::vector<std::uint8_t> elf(64, 0);
  const std::uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  std::copy(std::begin(ident), std::end(ident), elf.begin());
  elf[16] = 2;   // ET_EXEC
  elf[18] = 190; // EM_CUDA
  elf.push_back(0);
  for (const std::string& f : functions) {
    elf.insert(elf.end(), f.begin(), f.end());
    elf.push_back(0);
  }
  const std::uint64_t end = elf.size(); // e_shoff: where the (no) section headers start
  std::memcpy(elf.data() + 40, &end, 8);
  return elf;
}

TEST_CASE("a GPU step with a cubin: loaded from it; from its PTX where the driver refuses it; a cubin that is no CUDA ELF is refused by name") {
  nova::ExecutableDesc d = fake_gpu_plan(64);
  d.binary_format = "cubin";
  d.binary = fake_cubin({"nova_fake_copy", "nova_fake_inc"});
  d.validate();
  CHECK(nova::ExecutableDesc::deserialize(d.serialize()) == d);
  // What validate() refuses.
  nova::ExecutableDesc bad = d;
  bad.binary[18] = 62; // EM_X86_64
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("its cubin is not a 64-bit ELF for the CUDA architecture"),
                       nova::FormatError);
  bad = d;
  bad.binary_format = "fatbin";
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("unknown binary format 'fatbin'"), nova::FormatError);
  bad = d;
  bad.binary_format.clear();
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("binary code without a binary format"), nova::FormatError);
  bad = d;
  bad.object_format = "elf-shared-object";
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("a cubin beside a 'elf-shared-object' object"),
                       nova::FormatError);

  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  nova::Tensor x = nova::Tensor::full({64}, 2.5, nova::DType::f32);
  auto run = [&](const nova::ExecutableDesc& desc) {
    nova::Tensor w = nova::Tensor::full({64}, -1.0, nova::DType::f32);
    std::vector<nova::Tensor> args{x, w};
    std::vector<nova::Tensor> out = (*nova::load_executable(desc))(args);
    CHECK(out[0].at({5}) == 3.5);
    CHECK(w.at({63}) == 0.0);
  };
  run(d); // loads the driver, so that the fake's counters can be found
  void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(fake != nullptr);
  auto cubins = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cuda_cubins_loaded"));
  auto refuse = reinterpret_cast<void (*)(int)>(dlsym(fake, "fake_cuda_refuse_cubins"));
  auto held = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cuda_held"));
  REQUIRE((cubins && refuse && held));
  const int first = cubins();
  CHECK(first >= 1);
  run(d);
  CHECK(cubins() == first + 1);
  // A driver that refuses it (another GPU, an ELF newer than it): the PTX.
  refuse(1);
  run(d);
  refuse(0);
  CHECK(cubins() == first + 1);
  // A cubin the driver takes but without a kernel: the call is named, as for PTX.
  nova::ExecutableDesc missing = d;
  missing.binary = fake_cubin({"nova_fake_copy"});
  CHECK_THROWS_WITH_AS(nova::load_executable(missing),
                       doctest::Contains("cuModuleGetFunction(nova_fake_inc): CUDA_ERROR_NOT_FOUND"), nova::Error);
  CHECK(held() == 0);
}

TEST_CASE("PTX newer than the driver: a named error with both versions and what would load") {
  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  env.set("FAKE_CUDA_OLD_DRIVER", "1");
  nova::ExecutableDesc d = fake_gpu_plan(64); // PTX (ISA 8.0) alone
  CHECK_THROWS_WITH_AS(nova::load_executable(d),
                       doctest::Contains("cuModuleLoadData: CUDA_ERROR_UNSUPPORTED_PTX_VERSION (the provided PTX was "
                                         "compiled with an unsupported toolchain.): its PTX is ISA 8.0, newer than "
                                         "this driver (CUDA 13.0) compiles, and it carries no cubin: a newer driver, "
                                         "or the step compiled where ptxas for this GPU is (its cubin then loads)"),
                       nova::Error);
  // With a cubin the driver refuses (another GPU's): both said.
  d.binary_format = "cubin";
  d.binary = fake_cubin({"nova_fake_copy", "nova_fake_inc"});
  void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(fake != nullptr);
  auto refuse = reinterpret_cast<void (*)(int)>(dlsym(fake, "fake_cuda_refuse_cubins"));
  auto held = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cuda_held"));
  REQUIRE((refuse && held));
  refuse(1);
  CHECK_THROWS_WITH_AS(nova::load_executable(d),
                       doctest::Contains("and its cubin was refused (cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU"),
                       nova::Error);
  refuse(0);
  CHECK(held() == 0);
  // Its cubin taken: loads as before.
  nova::Tensor x = nova::Tensor::full({64}, 2.5, nova::DType::f32), w = nova::Tensor::full({64}, -1.0, nova::DType::f32);
  std::vector<nova::Tensor> args{x, w};
  CHECK((*nova::load_executable(d))(args)[0].at({5}) == 3.5);
}

TEST_CASE("a GPU kernel in clusters is launched with the driver's cluster attribute (cuLaunchKernelEx), in and out of a graph") {
  nova::ExecutableDesc d = fake_gpu_plan(128); // 4 blocks a launch
  d.kernels[1].cluster = 2;
  d.validate();
  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  nova::Tensor x = nova::Tensor::full({128}, 2.5, nova::DType::f32);
  for (const char* graph : {"1", "0"}) {
    env.set("NOVA_CUDA_GRAPH", graph);
    nova::Tensor w = nova::Tensor::full({128}, -1.0, nova::DType::f32);
    std::vector<nova::Tensor> args{x, w};
    void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
    auto launches = fake ? reinterpret_cast<const char* (*)()>(dlsym(fake, "fake_cuda_launches")) : nullptr;
    const std::size_t before = launches ? std::string(launches()).size() : 0;
    std::vector<nova::Tensor> out = (*nova::load_or_describe(d))(args);
    CHECK(out[0].at({5}) == 3.5);
    CHECK(w.at({127}) == 0.0);
    fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(fake != nullptr);
    launches = reinterpret_cast<const char* (*)()>(dlsym(fake, "fake_cuda_launches"));
    REQUIRE(bool(launches));
    CAPTURE(graph);
    CHECK(std::string(launches()).substr(before).find(
              "nova_fake_copy<<<4,32,0>>>;nova_fake_inc<<<4,32,65536,cluster 2>>>;") != std::string::npos);
  }
  // A GPU that holds fewer clusters at once than a launch's: a note at load.
  {
    env.set("FAKE_CUDA_CLUSTERS", "1");
    const std::string text = nova_test::captured_stderr([&] { nova::load_or_describe(d); });
    CHECK(text.find("nova: note: kernel nova_fake_inc launches 2 clusters of 2, this GPU holds 1 at once") !=
          std::string::npos);
    CHECK(text.find("nova_fake_copy") == std::string::npos);
    env.unset("FAKE_CUDA_CLUSTERS");
  }
  // Workgroups that are not whole clusters, or a cluster past 8: refused.
  nova::ExecutableDesc uneven = d;
  uneven.kernels[1].cluster = 3;
  CHECK_THROWS_WITH_AS(uneven.validate(), doctest::Contains("are not whole clusters of 3"), nova::Error);
  nova::ExecutableDesc wide = d;
  wide.kernels[1].cluster = 16;
  CHECK_THROWS_WITH_AS(wide.validate(), doctest::Contains("clusters of 16 on a GPU (1 to 8)"), nova::Error);
  // The description keeps it.
  CHECK(nova::ExecutableDesc::deserialize(d.serialize(), "clusters").kernels[1].cluster == 2);
}

TEST_CASE("a GPU step through the (fake) CUDA driver: buffers, launches, in-place inputs; no GPU is a named error") {
  nova::ExecutableDesc d = fake_gpu_plan(64);
  nova::Tensor x = nova::Tensor::full({64}, 2.5, nova::DType::f32);
  nova::Tensor w = nova::Tensor::full({64}, -1.0, nova::DType::f32);
  {
    nova_test::Env env;
    env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
    std::shared_ptr<nova::Executable> exe = nova::load_or_describe(d);
    REQUIRE(exe->kind() == "cuda");
    std::vector<nova::Tensor> args{x, w};
    std::vector<nova::Tensor> out = (*exe)(args);
    CHECK(out[0].at({5}) == 3.5);  // x + 1, through the arena
    CHECK(x.at({5}) == 2.5);       // the input itself untouched
    CHECK(w.at({63}) == 0.0);      // updated in place: the aliased output is its input
    CHECK(out[1].at({0}) == 0.0);
    out = (*exe)(args);
    CHECK(w.at({0}) == 1.0);       // a second step starts from the first's update
    void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(fake != nullptr);
    auto launches = reinterpret_cast<const char* (*)()>(dlsym(fake, "fake_cuda_launches"));
    REQUIRE(bool(launches));
    std::string log = launches();
    // Each call replays the plan, captured at load, as one graph launch.
    const std::string plan = "nova_fake_copy<<<2,32,0>>>;nova_fake_inc<<<2,32,65536>>>;nova_fake_copy<<<2,32,0>>>;"
                             "nova_fake_inc<<<2,32,65536>>>;";
    CHECK(log.find("graph;" + plan + "graph;" + plan) != std::string::npos);
    // A kernel the PTX does not hold: the driver call is named.
    nova::ExecutableDesc missing = d;
    missing.kernels[1].symbol = "nova_k9";
    CHECK_THROWS_WITH_AS(nova::load_executable(missing),
                         doctest::Contains("cuModuleGetFunction(nova_k9): CUDA_ERROR_NOT_FOUND"), nova::Error);
    // Modules and contexts are given back: by that failed load, and by the
    // executable once it goes.
    auto held = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cuda_held"));
    REQUIRE(bool(held));
    CHECK(held() == 5); // a module, a context, a stream, the graph and its executable form
    exe.reset();
    CHECK(held() == 0);
    // NOVA_CUDA_GRAPH=0: kernel by kernel, the same results.
    env.set("NOVA_CUDA_GRAPH", "0");
    std::size_t before = std::string(launches()).size();
    nova::Tensor w2 = nova::Tensor::full({64}, -1.0, nova::DType::f32);
    std::vector<nova::Tensor> args2{x, w2};
    std::vector<nova::Tensor> direct = (*nova::load_or_describe(d))(args2);
    CHECK(direct[0].at({5}) == 3.5);
    CHECK(w2.at({63}) == 0.0);
    CHECK(std::string(launches()).substr(before) == plan);
    CHECK(held() == 0);
    // A driver that captures but cannot instantiate the graph: kernel by
    // kernel, the same results, nothing held after.
    env.unset("NOVA_CUDA_GRAPH");
    env.set("FAKE_CUDA_GRAPH_FAILS", "1");
    before = std::string(launches()).size();
    nova::Tensor w3 = nova::Tensor::full({64}, -1.0, nova::DType::f32);
    std::vector<nova::Tensor> args3{x, w3};
    std::vector<nova::Tensor> fallback = (*nova::load_or_describe(d))(args3);
    CHECK(fallback[0].at({5}) == 3.5);
    CHECK(std::string(launches()).substr(before) == plan);
    CHECK(held() == 0);
    dlclose(fake);
  }
  {
    nova_test::Env env;
    env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA_NO_DEVICE);
    std::shared_ptr<nova::Executable> exe = nova::load_or_describe(d);
    CHECK(exe->kind() == "unloadable");
    std::vector<nova::Tensor> args{x, w};
    CHECK_THROWS_WITH_AS((*exe)(args), doctest::Contains("this executable is for a CUDA device"), nova::Error);
    CHECK_THROWS_WITH_AS((*exe)(args), doctest::Contains("CUDA_ERROR_NO_DEVICE"), nova::Error);
  }
}

TEST_CASE("a process's GPU: NOVA_CUDA_DEVICE, else its rank on the node as its launcher gives it, else 0") {
  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  env.set("FAKE_CUDA_DEVICES", "4");
  for (const char* name : {"NOVA_CUDA_DEVICE", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                           "LOCAL_RANK"})
    env.unset(name);
  CHECK(nova::cuda_device() == 0);
  // The launchers' variables, mpirun's first, then srun's, then torchrun's.
  env.set("LOCAL_RANK", "3");
  CHECK(nova::cuda_device() == 3);
  env.set("SLURM_LOCALID", "2");
  CHECK(nova::cuda_device() == 2);
  env.set("MPI_LOCALRANKID", "1");
  CHECK(nova::cuda_device() == 1);
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "0");
  CHECK(nova::cuda_device() == 0);
  env.set("NOVA_CUDA_DEVICE", "2"); // over all of them
  CHECK(nova::cuda_device() == 2);
  CHECK(nova::named_target("cuda").name == "cuda");
  // A step loads on that GPU: its primary context is that device's.
  nova::ExecutableDesc d = fake_gpu_plan(64);
  nova::Tensor x = nova::Tensor::full({64}, 2.5, nova::DType::f32), w = nova::Tensor::full({64}, -1.0, nova::DType::f32);
  std::vector<nova::Tensor> args{x, w};
  CHECK((*nova::load_executable(d))(args)[0].at({5}) == 3.5);
  void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(fake != nullptr);
  auto context_device = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cuda_context_device"));
  REQUIRE(bool(context_device));
  CHECK(context_device() == 2);
  // More ranks on the node than GPUs, a device the driver lacks, not a number.
  env.unset("NOVA_CUDA_DEVICE");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "5");
  CHECK_THROWS_WITH_AS(nova::cuda_device(),
                       doctest::Contains("OMPI_COMM_WORLD_LOCAL_RANK=5 (this process's rank on its node) asks for "
                                         "CUDA device 5, and the driver reports 4 GPUs: each rank of a data-parallel "
                                         "job on a node needs a GPU of its own (NOVA_CUDA_DEVICE picks one)"),
                       nova::Error);
  CHECK_THROWS_WITH_AS(nova::load_executable(d), doctest::Contains("asks for CUDA device 5"), nova::Error);
  env.set("NOVA_CUDA_DEVICE", "4");
  CHECK_THROWS_WITH_AS(nova::cuda_device_target(), doctest::Contains("NOVA_CUDA_DEVICE=4 asks for CUDA device 4, and the driver reports 4 GPUs"),
                       nova::Error);
  env.set("NOVA_CUDA_DEVICE", "one");
  CHECK_THROWS_WITH_AS(nova::cuda_device(), doctest::Contains("NOVA_CUDA_DEVICE='one' is not a device number"),
                       nova::Error);
  // A process that sees one GPU (its launcher bound it to it) uses it,
  // whatever its rank; asked for another by NOVA_CUDA_DEVICE, it says so.
  env.set("FAKE_CUDA_DEVICES", "1");
  env.unset("NOVA_CUDA_DEVICE");
  CHECK(nova::cuda_device() == 0); // OMPI_COMM_WORLD_LOCAL_RANK=5
  env.set("NOVA_CUDA_DEVICE", "1");
  CHECK_THROWS_WITH_AS(nova::cuda_device(), doctest::Contains("NOVA_CUDA_DEVICE=1 asks for CUDA device 1, and the "
                                                              "driver reports 1 GPU"),
                       nova::Error);
}

TEST_CASE("a GPU step that does not fit the device's free memory: a named error with the sizes, before any allocation") {
  nova::ExecutableDesc d = fake_gpu_plan(64); // arena 512 bytes, inputs and the output not aliased 768
  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  env.set("FAKE_CUDA_FREE_MEMORY", "1279");
  CHECK_THROWS_WITH_AS(nova::load_executable(d),
                       doctest::Contains("needs 1280 bytes of device memory (arena 512 bytes, inputs and outputs 768 "
                                         "bytes), and this GPU has 1279 bytes free of 143771.0 MiB: compile it for "
                                         "the memory there is (NOVA_GPU_MEMORY=0M"),
                       nova::Error);
  void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(fake != nullptr);
  auto held = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cuda_held"));
  REQUIRE(bool(held));
  CHECK(held() == 0);
  // Exactly enough: loads and runs.
  env.set("FAKE_CUDA_FREE_MEMORY", "1280");
  nova::Tensor x = nova::Tensor::full({64}, 2.5, nova::DType::f32), w = nova::Tensor::full({64}, -1.0, nova::DType::f32);
  std::vector<nova::Tensor> args{x, w};
  std::vector<nova::Tensor> out = (*nova::load_executable(d))(args);
  CHECK(out[0].at({5}) == 3.5);
  CHECK(held() == 0);
}

TEST_CASE("programmatic dependent launch: a graph launches each kernel whose PTX waits first as a dependent of the one before") {
  // nova_fake_inc's entry waits for the grids before it (as the compiler's
  // sm_90 kernels do); nova_fake_copy's does not, so it is never launched
  // early.
  nova::ExecutableDesc d = fake_gpu_plan(64);
  const std::string ptx =
      ".version 8.0\n.target sm_90a\n.entry nova_fake_copy(\n)\n{\n}\n.entry nova_fake_inc(\n)\n{\n"
      "griddepcontrol.wait;\ngriddepcontrol.launch_dependents;\n}\n";
  d.object.assign(ptx.begin(), ptx.end());
  d.validate();
  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  for (const char* name : {"NOVA_GPU_PDL", "NOVA_CUDA_GRAPH", "NOVA_GPU_SYNC", "FAKE_CUDA_PDL_FAILS"})
    env.unset(name);
  nova::Tensor x = nova::Tensor::full({64}, 2.5, nova::DType::f32);
  auto step = [&] {
    nova::Tensor w = nova::Tensor::full({64}, -1.0, nova::DType::f32);
    std::vector<nova::Tensor> args{x, w};
    std::vector<nova::Tensor> out = (*nova::load_executable(d))(args);
    CHECK(out[0].at({5}) == 3.5);
    CHECK(w.at({63}) == 0.0);
  };
  step(); // loads the driver
  void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(fake != nullptr);
  auto launches = reinterpret_cast<const char* (*)()>(dlsym(fake, "fake_cuda_launches"));
  REQUIRE(bool(launches));
  auto since = [&](std::size_t before) { return std::string(launches()).substr(before); };
  const std::string early = "graph;nova_fake_copy<<<2,32,0>>>;nova_fake_inc<<<2,32,65536,programmatic>>>;"
                            "nova_fake_copy<<<2,32,0>>>;nova_fake_inc<<<2,32,65536,programmatic>>>;";
  const std::string plain = "nova_fake_copy<<<2,32,0>>>;nova_fake_inc<<<2,32,65536>>>;nova_fake_copy<<<2,32,0>>>;"
                            "nova_fake_inc<<<2,32,65536>>>;";
  std::size_t before = std::string(launches()).size();
  step();
  CHECK(since(before) == early);
  // Kernel by kernel (no graph), or NOVA_GPU_PDL=0: plain launches.
  env.set("NOVA_CUDA_GRAPH", "0");
  before = std::string(launches()).size();
  step();
  CHECK(since(before) == plain);
  env.unset("NOVA_CUDA_GRAPH");
  env.set("NOVA_GPU_PDL", "0");
  before = std::string(launches()).size();
  step();
  CHECK(since(before) == "graph;" + plain);
  env.unset("NOVA_GPU_PDL");
  // A driver whose graphs refuse them: the graph again without, said once.
  env.set("FAKE_CUDA_PDL_FAILS", "1");
  before = std::string(launches()).size();
  const std::string text = nova_test::captured_stderr(step);
  CHECK(since(before) == "graph;" + plain);
  CHECK(text.find("cuLaunchKernelEx(nova_fake_inc): CUDA_ERROR_NOT_SUPPORTED (operation not supported); capturing "
                  "its graph again without programmatic dependent launches (NOVA_GPU_PDL=0 skips them)") !=
        std::string::npos);
  // A step whose kernels do not wait first (fake_gpu_plan's): plain.
  env.unset("FAKE_CUDA_PDL_FAILS");
  nova::ExecutableDesc without = fake_gpu_plan(64);
  nova::Tensor w = nova::Tensor::full({64}, -1.0, nova::DType::f32);
  std::vector<nova::Tensor> args{x, w};
  before = std::string(launches()).size();
  (*nova::load_executable(without))(args);
  CHECK(since(before) == "graph;" + plain);
}

TEST_CASE("a GPU kernel that faults: the step's error says a launch failed; NOVA_GPU_SYNC=1 names the launch, its kernel and grid") {
  // The fake driver faults each launch of FAKE_CUDA_FAULT's kernel as an
  // out-of-bounds access does: sticky (every later wait, copy and launch
  // fails) until the context is released. Launch 1 of fake_gpu_plan's 4
  // is the first nova_fake_inc.
  nova::ExecutableDesc d = fake_gpu_plan(64);
  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  env.unset("NOVA_GPU_SYNC");
  env.unset("NOVA_CUDA_GRAPH");
  nova::Tensor x = nova::Tensor::full({64}, 2.5, nova::DType::f32);
  auto step = [&](nova::Tensor& w) {
    std::vector<nova::Tensor> args{x, w};
    (*nova::load_or_describe(d))(args); // the executable goes at the end of the call, the fault with its context
  };
  // Loads the driver, so that the fake's log can be found; no fault yet.
  nova::Tensor w0 = nova::Tensor::full({64}, -1.0, nova::DType::f32);
  step(w0);
  void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(fake != nullptr);
  auto launches = reinterpret_cast<const char* (*)()>(dlsym(fake, "fake_cuda_launches"));
  auto held = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cuda_held"));
  REQUIRE((launches && held));
  const std::string plan = "nova_fake_copy<<<2,32,0>>>;nova_fake_inc<<<2,32,65536>>>;nova_fake_copy<<<2,32,0>>>;"
                           "nova_fake_inc<<<2,32,65536>>>;";
  env.set("FAKE_CUDA_FAULT", "nova_fake_inc");
  const std::string hint = "a kernel faulted: one of this step's 4 launches, or one before them on this GPU (the "
                           "driver reports a fault at its next call, and the process's CUDA context is unusable from "
                           "then on); NOVA_GPU_SYNC=1 waits after each launch and names the one that fails";
  for (const char* graph : {"1", "0"}) {
    CAPTURE(graph);
    env.set("NOVA_CUDA_GRAPH", graph);
    nova::Tensor w = nova::Tensor::full({64}, -1.0, nova::DType::f32);
    // Kernel by kernel the next launch reports the fault (the wait, with a
    // graph): a call about another kernel, which the message says.
    const std::string wait =
        std::strcmp(graph, "1") == 0 ? "cuStreamSynchronize" : "cuLaunchKernel(nova_fake_copy)";
    const std::string expected = wait + ": CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered); " + hint;
    CHECK_THROWS_WITH_AS(step(w), doctest::Contains(expected.c_str()), nova::Error);
    CHECK(w.at({0}) == -1.0); // the host's tensor as it was
    CHECK(held() == 0);
  }
  env.unset("NOVA_CUDA_GRAPH");
  // NOVA_GPU_SYNC=1: kernel by kernel, each waited for; the one that
  // faulted named, nothing launched after it.
  env.set("NOVA_GPU_SYNC", "1");
  std::size_t before = std::string(launches()).size();
  nova::Tensor w = nova::Tensor::full({64}, -1.0, nova::DType::f32);
  CHECK_THROWS_WITH_AS(step(w),
                       doctest::Contains("launch 1 of 4, kernel nova_fake_inc (inc), 2 blocks of 32 threads, 65536 "
                                         "bytes of shared memory, failed: cuStreamQuery: "
                                         "CUDA_ERROR_ILLEGAL_ADDRESS"),
                       nova::Error);
  CHECK(std::string(launches()).substr(before) == "nova_fake_copy<<<2,32,0>>>;nova_fake_inc<<<2,32,65536>>>;");
  CHECK(held() == 0);
  // Without a fault the same results as the graph's, no graph captured;
  // a launch that runs past NOVA_GPU_SYNC's seconds (here each
  // nova_fake_inc keeps the fake GPU busy 0.3 s) named while it runs.
  env.unset("FAKE_CUDA_FAULT");
  env.set("FAKE_CUDA_HANG", "nova_fake_inc:0.3");
  env.set("NOVA_GPU_SYNC", "0.1");
  before = std::string(launches()).size();
  nova::Tensor w2 = nova::Tensor::full({64}, -1.0, nova::DType::f32);
  std::vector<nova::Tensor> args{x, w2};
  std::vector<nova::Tensor> out;
  const std::string text = nova_test::captured_stderr([&] { out = (*nova::load_or_describe(d))(args); });
  CHECK(out[0].at({5}) == 3.5);
  CHECK(w2.at({63}) == 0.0);
  CHECK(std::string(launches()).substr(before) == plan);
  CHECK(held() == 0);
  CHECK(text.find("nova: NOVA_GPU_SYNC: launch 1 of 4, kernel nova_fake_inc (inc), 2 blocks of 32 threads, 65536 "
                  "bytes of shared memory has run for 0.1 s and is still running") != std::string::npos);
  CHECK(text.find("launch 3 of 4, kernel nova_fake_inc") != std::string::npos);
  CHECK(text.find("nova_fake_copy") == std::string::npos);
  env.unset("FAKE_CUDA_HANG");
  // A value that is not a number of seconds: the load says so.
  env.set("NOVA_GPU_SYNC", "yes");
  CHECK_THROWS_WITH_AS(nova::load_or_describe(d), doctest::Contains("NOVA_GPU_SYNC='yes': expected 0 (off)"),
                       nova::Error);
  CHECK(held() == 0);
}

TEST_CASE("NOVA_TIMELINE on a data-parallel GPU step (1 rank, NCCL fake): each launch and the bucket's sums timed by events, kernel by kernel") {
  // The fake clock: a launch takes a microsecond a block (2 here), a sum
  // none. The bucket starts after launch 1 (its sums on their own stream)
  // and is waited for before launch 2.
  nova::ExecutableDesc d = fake_dp_plan();
  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  env.set("NOVA_NCCL_LIBRARY", NOVA_FAKE_CUDA);
  auto group = nova::dist::loopback_group(1);
  nova::dist::set_communicator(group[0]);
  std::shared_ptr<nova::Executable> exe = nova::load_or_describe(d);
  nova::Tensor x = nova::Tensor::full({64}, 1.0, nova::DType::f32), w = nova::Tensor::full({64}, 0.0, nova::DType::f32);
  std::vector<nova::Tensor> args{x, w};
  nova::set_timeline(true);
  std::vector<nova::Tensor> outs = (*exe)(args);
  nova::set_timeline(false);
  CHECK(outs[0].at({0}) == 2.0); // x + 1, summed over one rank
  nova::RunTimeline t = nova::last_timeline();
  CHECK(t.rank == 0);
  REQUIRE(t.launches.size() == 3);
  REQUIRE(t.collectives.size() == 1);
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(t.launches[i].end_s - t.launches[i].begin_s == doctest::Approx(2e-6).epsilon(1e-3));
    if (i > 0) CHECK(t.launches[i].begin_s >= t.launches[i - 1].end_s);
  }
  const nova::CollectiveTiming& c = t.collectives[0];
  CHECK(c.bytes == 64 * 4);
  CHECK(c.after_launch == 2);
  CHECK(c.start_s >= t.launches[1].end_s); // after the gradient's launch
  CHECK(c.wait_begin_s <= c.wait_end_s);
  CHECK(c.wait_end_s <= t.launches[2].begin_s); // the launch after the wait starts once it is summed
  CHECK(t.end_s >= t.launches[2].end_s);
  // A run without it keeps the last timeline and replays the graph.
  outs = (*exe)(args);
  nova::dist::set_communicator(nullptr);
  CHECK(nova::last_timeline().begin_s == t.begin_s);
  CHECK(nova::timeline_json(t).find("bucket 0 (256 bytes) summed over the ranks") != std::string::npos);
  // A name longer than any fixed buffer (a side-by-side launch's) stays
  // whole, quotes escaped: the trace is valid JSON.
  t.kernel_names[0] = std::string(400, 'k') + " \"quoted\"";
  const std::string json = nova::timeline_json(t);
  CHECK(json.find("{\"name\":\"0 " + std::string(400, 'k') + " \\\"quoted\\\"\",\"ph\":\"X\"") != std::string::npos);
  CHECK(json.find("{\"name\":\"2 ") != std::string::npos);
}

TEST_CASE("a GPU step keeps the tensors it updates in place on the device: no copy either way until the host reads one; what the host touched goes up again; a swapped or replaced tensor and an executable that goes give their bytes back") {
  nova::ExecutableDesc d = fake_gpu_plan(64);
  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  nova::Tensor x = nova::Tensor::full({64}, 2.5, nova::DType::f32);
  nova::Tensor w = nova::Tensor::full({64}, -1.0, nova::DType::f32);
  std::shared_ptr<nova::Executable> exe = nova::load_or_describe(d);
  REQUIRE(exe->kind() == "cuda");
  void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(fake != nullptr);
  auto counts = reinterpret_cast<void (*)(int*, int*)>(dlsym(fake, "fake_cuda_copies"));
  REQUIRE(bool(counts));
  int in0 = 0, out0 = 0;
  auto copies = [&] {
    int in = 0, out = 0;
    counts(&in, &out);
    std::pair<int, int> since{in - in0, out - out0};
    in0 = in;
    out0 = out;
    return since;
  };
  copies();
  std::vector<nova::Tensor> args{x, w};
  std::vector<nova::Tensor> out = (*exe)(args);
  // Up: x and w; down: the fresh output only (w stays on the device).
  CHECK(copies() == std::pair{2, 1});
  out = (*exe)(args);
  CHECK(copies() == std::pair{1, 1}); // w's newer bytes already there
  CHECK(out[0].at({5}) == 3.5);
  CHECK(copies() == std::pair{0, 0}); // a fresh output is on the host
  CHECK(w.at({63}) == 1.0);            // -1 + 2 steps: copied back at this read
  CHECK(copies() == std::pair{0, 1});
  CHECK(w.at({0}) == 1.0);
  CHECK(copies() == std::pair{0, 0});
  // The host writes: the next call takes its bytes.
  w.data<float>()[0] = 10.0f;
  out = (*exe)(args);
  CHECK(copies() == std::pair{2, 1});
  CHECK(w.to_vector()[0] == 11.0);
  CHECK(w.to_vector()[1] == 2.0);
  CHECK(copies() == std::pair{0, 1});
  out = (*exe)(args); // w held again: 12, 3, ...
  CHECK(copies() == std::pair{2, 1});
  // Another tensor in w's place: w's bytes come back (one down) before its
  // device buffer takes the new one's (x and w2 up, the output down).
  nova::Tensor w2 = nova::Tensor::full({64}, -5.0, nova::DType::f32);
  std::vector<nova::Tensor> replaced{x, w2};
  out = (*exe)(replaced);
  CHECK(copies() == std::pair{2, 2});
  CHECK(w.at({0}) == 12.0);
  CHECK(w.at({1}) == 3.0);
  CHECK(copies() == std::pair{0, 0});
  // w2 held (-4); the executable goes: it copies w2 back first.
  exe.reset();
  CHECK(copies() == std::pair{0, 1});
  CHECK(w2.at({0}) == -4.0);
  CHECK(copies() == std::pair{0, 0});
  // NOVA_GPU_RESIDENT=0: every in-place update copied back each call.
  env.set("NOVA_GPU_RESIDENT", "0");
  std::shared_ptr<nova::Executable> plain = nova::load_or_describe(d);
  out = (*plain)(args);
  out = (*plain)(args);
  CHECK(copies() == std::pair{4, 4});
  CHECK(w.at({0}) == 14.0);
  CHECK(copies() == std::pair{0, 0});
  dlclose(fake);
}

// Run by the ctest entry runtime:profile, which sets NOVA_PROFILE (read once
// a process); skipped in the plain runtime run.
TEST_CASE("NOVA_PROFILE on a GPU step: kernel by kernel, each launch timed between two events" *
          doctest::skip(std::getenv("NOVA_PROFILE") == nullptr)) {
  REQUIRE(nova::profiling_enabled());
  nova::reset_profile();
  // 4 launches of 4 blocks each; the fake GPU's launches take 1 us a block.
  nova::ExecutableDesc d = fake_gpu_plan(128);
  nova::Tensor x = nova::Tensor::full({128}, 2.5, nova::DType::f32);
  nova::Tensor w = nova::Tensor::full({128}, -1.0, nova::DType::f32);
  nova_test::Env env;
  env.set("NOVA_CUDA_DRIVER", NOVA_FAKE_CUDA);
  void* fake = dlopen(NOVA_FAKE_CUDA, RTLD_NOW);
  REQUIRE(fake != nullptr);
  auto launches = reinterpret_cast<const char* (*)()>(dlsym(fake, "fake_cuda_launches"));
  auto held = reinterpret_cast<int (*)()>(dlsym(fake, "fake_cuda_held"));
  REQUIRE(bool(launches));
  REQUIRE(bool(held));
  {
    std::shared_ptr<nova::Executable> exe = nova::load_or_describe(d);
    REQUIRE(exe->kind() == "cuda");
    std::size_t before = std::string(launches()).size();
    std::vector<nova::Tensor> args{x, w};
    std::vector<nova::Tensor> out = (*exe)(args);
    out = (*exe)(args);
    CHECK(out[0].at({5}) == 3.5);
    CHECK(w.at({0}) == 1.0); // two steps, as without profiling
    // No graph: the plan launched kernel by kernel, twice.
    const std::string plan = "nova_fake_copy<<<4,32,0>>>;nova_fake_inc<<<4,32,65536>>>;nova_fake_copy<<<4,32,0>>>;"
                             "nova_fake_inc<<<4,32,65536>>>;";
    CHECK(std::string(launches()).substr(before) == plan + plan);
  }
  CHECK(held() == 0); // its 5 timing events given back with the rest
  const std::string report = nova::profile_report(5);
  INFO(report);
  CHECK(report.find("(4 launches of 2 kernels): 2 runs, 0.016 ms per run, 100.0% of it in kernels") != std::string::npos);
  // Each kernel: 2 launches a run of 0.004 ms, half the time.
  CHECK(report.find("  nova_fake_copy   50.0%          2.0      0.004       0.0     0.0  copy") != std::string::npos);
  CHECK(report.find("  nova_fake_inc    50.0%          2.0      0.004       0.0     0.0  inc") != std::string::npos);
  dlclose(fake);
}
