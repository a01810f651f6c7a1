// cuda_driver.hpp - the CUDA driver API, resolved from libcuda.so.1 at run
// time (dlopen), so nothing links it. Only the calls Nova makes are listed;
// their types are the driver API's, written out here so the runtime builds
// without the CUDA headers (test_cuda_driver checks them against cuda.h when
// the toolkit is present).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nova::cuda {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUgraph = void*;
using CUgraphExec = void*;
using CUevent = void*;
using CUdeviceptr = unsigned long long;

/// CUfunction_attribute: the dynamic shared memory a kernel may be launched with.
inline constexpr int kFuncMaxDynamicSharedSizeBytes = 8;

/// cuLaunchKernelEx's configuration (CUlaunchConfig) and attribute
/// (CUlaunchAttribute: an id, padding, a 64-byte value), for a launch in
/// clusters (kLaunchAttributeClusterDimension: value x, y, z).
struct LaunchAttribute {
  int id = 0;
  char pad[4] = {};
  std::uint32_t value[16] = {};
};
struct LaunchConfig {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1, block_x = 1, block_y = 1, block_z = 1, shared_bytes = 0;
  CUstream stream = nullptr;
  LaunchAttribute* attributes = nullptr;
  unsigned attribute_count = 0;
};
inline constexpr int kLaunchAttributeClusterDimension = 4;
/// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (value[0] = 1:
/// the launch may start before the one before it in the stream ends; its
/// kernel waits for that one itself, griddepcontrol.wait).
inline constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;

/// CUdevice_attribute values used (cuda.h).
enum Attribute : int {
  kMaxThreadsPerBlock = 1,
  kMaxSharedMemoryPerBlock = 8,
  kWarpSize = 10,
  kMaxRegistersPerBlock = 12,
  kClockRate = 13, // kHz
  kMultiprocessorCount = 16,
  kMemoryClockRate = 36, // kHz
  kGlobalMemoryBusWidth = 37, // bits
  kL2CacheSize = 38,
  kMaxThreadsPerMultiprocessor = 39,
  kComputeCapabilityMajor = 75,
  kComputeCapabilityMinor = 76,
  kMaxSharedMemoryPerMultiprocessor = 81,
  kMaxRegistersPerMultiprocessor = 82,
  kMaxSharedMemoryPerBlockOptin = 97,
  kMaxBlocksPerMultiprocessor = 106,
};

struct Driver {
  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDriverGetVersion)(int* version) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDeviceTotalMem)(std::size_t* bytes, CUdevice device) = nullptr; // cuDeviceTotalMem_v2
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;
  // Running kernels (cuda_executable.cpp).
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext context) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule module) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr* pointer, std::size_t bytes) = nullptr;                       // _v2
  CUresult (*cuMemFree)(CUdeviceptr pointer) = nullptr;                                            // _v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr to, const void* from, std::size_t bytes) = nullptr;         // _v2
  CUresult (*cuMemcpyDtoH)(void* to, CUdeviceptr from, std::size_t bytes) = nullptr;               // _v2
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                             unsigned blockY, unsigned blockZ, unsigned sharedBytes, CUstream stream,
                             void** params, void** extra) = nullptr;
  // Launches in clusters (CUDA 12; null before: only steps with cluster
  // kernels need it, and say so).
  CUresult (*cuLaunchKernelEx)(const LaunchConfig* config, CUfunction function, void** params,
                               void** extra) = nullptr;
  // How many clusters of a launch the device holds at once (optional: a
  // note, not a need).
  CUresult (*cuOccupancyMaxActiveClusters)(int* clusters, CUfunction function, const LaunchConfig* config) = nullptr;
  // Streams and graphs (CUDA 11.4+; null when the driver has not all of
  // them: the plan is then launched kernel by kernel on the default stream).
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream stream) = nullptr;                                      // _v2
  CUresult (*cuStreamSynchronize)(CUstream stream) = nullptr;
  // 0 when the stream's work is done, kErrorNotReady while it runs
  // (NOVA_GPU_SYNC's wait, which reports a launch that runs long).
  CUresult (*cuStreamQuery)(CUstream stream) = nullptr;
  // Free and total device memory of the current context's device (a
  // step's buffers checked against it before they are allocated).
  CUresult (*cuMemGetInfo)(std::size_t* free, std::size_t* total) = nullptr; // _v2
  CUresult (*cuStreamBeginCapture)(CUstream stream, int mode) = nullptr;                       // _v2
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph* graph) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph, unsigned long long flags) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph graph) = nullptr;
  // Events (to order a second stream's work against the first).
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags) = nullptr;
  CUresult (*cuEventDestroy)(CUevent event) = nullptr;                                         // _v2
  CUresult (*cuEventRecord)(CUevent event, CUstream stream) = nullptr;
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags) = nullptr;
  bool has_events() const { return cuEventCreate && cuEventDestroy && cuEventRecord && cuStreamWaitEvent; }
  // Milliseconds between two completed events made without
  // kEventDisableTiming (NOVA_PROFILE's per-kernel times).
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end) = nullptr;
  bool has_graphs() const {
    return cuStreamCreate && cuStreamDestroy && cuStreamSynchronize && cuStreamBeginCapture && cuStreamEndCapture &&
           cuGraphInstantiateWithFlags && cuGraphLaunch && cuGraphExecDestroy && cuGraphDestroy;
  }
  // TMA tensor maps (CUDA 12 drivers; null before: only steps with TMA
  // kernels need it, and say so). `tensor_map` is a 64-byte aligned
  // 128-byte CUtensorMap.
  CUresult (*cuTensorMapEncodeTiled)(void* tensor_map, int data_type, std::uint32_t rank, void* global_address,
                                     const std::uint64_t* global_dims, const std::uint64_t* global_strides,
                                     const std::uint32_t* box, const std::uint32_t* element_strides, int interleave,
                                     int swizzle, int l2_promotion, int oob_fill) = nullptr;
};

/// CU_EVENT_DISABLE_TIMING: an event for ordering only; CU_EVENT_DEFAULT:
/// one that also records when the stream reached it.
inline constexpr unsigned kEventDisableTiming = 2, kEventDefault = 0;

/// CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: other threads' CUDA calls do not
/// disturb a capture.
inline constexpr int kCaptureModeThreadLocal = 1;
/// CUDA_ERROR_NOT_READY (cuStreamQuery: work still running).
inline constexpr int kErrorNotReady = 600;

/// CUtensorMapDataType and CUtensorMapSwizzle values (cuda.h).
inline constexpr int kTensorMapInt32 = 3, kTensorMapInt64 = 5, kTensorMapFloat16 = 6, kTensorMapFloat32 = 7,
                     kTensorMapFloat64 = 8, kTensorMapBfloat16 = 9;
constexpr int tensor_map_swizzle(std::uint32_t bytes) { return bytes == 32 ? 1 : bytes == 64 ? 2 : bytes == 128 ? 3 : 0; }
/// CU_TENSOR_MAP_L2_PROMOTION_L2_128B.
inline constexpr int kTensorMapL2Promotion128B = 2;

/// The driver, loaded and initialized once per process; nullptr when it
/// cannot be, with the reason in `why`.
const Driver* driver(std::string* why = nullptr);

/// "cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (invalid device ordinal)"
std::string describe_error(const Driver& d, const char* call, CUresult r);

/// Whether `r` is a kernel's fault while it ran (cuda.h: an illegal
/// address 700, a timeout 702, a device-side assert or trap 710, a stack
/// error, an illegal instruction, a misaligned address, an invalid address
/// space or PC, a failed launch 714-719): reported by the driver's next
/// call, whichever it is, and sticky (the context is unusable after it).
constexpr bool is_kernel_fault(CUresult r) { return r == 700 || r == 702 || r == 710 || (r >= 714 && r <= 719); }

} // namespace nova::cuda
