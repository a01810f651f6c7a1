// cuda_driver.cpp - loading the CUDA driver, and the live device's TargetDesc.
#include "cuda_driver.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "dl_library.hpp"
#include "gpu_target.hpp"
#include "nova/cuda.hpp"
#include "nova/error.hpp"

namespace nova::cuda {
namespace {

struct Loaded {
  Driver driver;
  bool ok = false;
  std::string why;
};

template <typename F>
bool resolve(void* handle, const char* symbol, F& slot, std::string& why) {
  return detail::resolve(handle, symbol, slot, why, "the CUDA driver");
}

Loaded load(const std::string& path) {
  Loaded l;
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    l.why = "no CUDA driver: " + path + " cannot be loaded (" + (err ? err : "unknown error") +
            "); a GPU and NVIDIA's driver are needed";
    return l;
  }
  Driver& d = l.driver;
  if (!resolve(handle, "cuInit", d.cuInit, l.why) ||
      !resolve(handle, "cuDriverGetVersion", d.cuDriverGetVersion, l.why) ||
      !resolve(handle, "cuDeviceGetCount", d.cuDeviceGetCount, l.why) ||
      !resolve(handle, "cuDeviceGet", d.cuDeviceGet, l.why) ||
      !resolve(handle, "cuDeviceGetName", d.cuDeviceGetName, l.why) ||
      !resolve(handle, "cuDeviceGetAttribute", d.cuDeviceGetAttribute, l.why) ||
      !resolve(handle, "cuDeviceTotalMem_v2", d.cuDeviceTotalMem, l.why) ||
      !resolve(handle, "cuGetErrorName", d.cuGetErrorName, l.why) ||
      !resolve(handle, "cuGetErrorString", d.cuGetErrorString, l.why) ||
      !resolve(handle, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain, l.why) ||
      !resolve(handle, "cuCtxSetCurrent", d.cuCtxSetCurrent, l.why) ||
      !resolve(handle, "cuDevicePrimaryCtxRelease_v2", d.cuDevicePrimaryCtxRelease, l.why) ||
      !resolve(handle, "cuCtxSynchronize", d.cuCtxSynchronize, l.why) ||
      !resolve(handle, "cuModuleLoadData", d.cuModuleLoadData, l.why) ||
      !resolve(handle, "cuModuleUnload", d.cuModuleUnload, l.why) ||
      !resolve(handle, "cuModuleGetFunction", d.cuModuleGetFunction, l.why) ||
      !resolve(handle, "cuFuncSetAttribute", d.cuFuncSetAttribute, l.why) ||
      !resolve(handle, "cuMemAlloc_v2", d.cuMemAlloc, l.why) ||
      !resolve(handle, "cuMemFree_v2", d.cuMemFree, l.why) ||
      !resolve(handle, "cuMemcpyHtoD_v2", d.cuMemcpyHtoD, l.why) ||
      !resolve(handle, "cuMemcpyDtoH_v2", d.cuMemcpyDtoH, l.why) ||
      !resolve(handle, "cuLaunchKernel", d.cuLaunchKernel, l.why))
    return l; // the handle stays open: a process loads the driver once
  // Optional: graphs (CUDA 11.4), TMA (CUDA 12).
  using detail::resolve_optional;
  resolve_optional(handle, "cuStreamCreate", d.cuStreamCreate);
  resolve_optional(handle, "cuStreamDestroy_v2", d.cuStreamDestroy);
  resolve_optional(handle, "cuStreamSynchronize", d.cuStreamSynchronize);
  resolve_optional(handle, "cuStreamQuery", d.cuStreamQuery);
  resolve_optional(handle, "cuMemGetInfo_v2", d.cuMemGetInfo);
  resolve_optional(handle, "cuStreamBeginCapture_v2", d.cuStreamBeginCapture);
  resolve_optional(handle, "cuStreamEndCapture", d.cuStreamEndCapture);
  resolve_optional(handle, "cuGraphInstantiateWithFlags", d.cuGraphInstantiateWithFlags);
  resolve_optional(handle, "cuGraphLaunch", d.cuGraphLaunch);
  resolve_optional(handle, "cuGraphExecDestroy", d.cuGraphExecDestroy);
  resolve_optional(handle, "cuGraphDestroy", d.cuGraphDestroy);
  resolve_optional(handle, "cuEventCreate", d.cuEventCreate);
  resolve_optional(handle, "cuEventDestroy_v2", d.cuEventDestroy);
  resolve_optional(handle, "cuEventRecord", d.cuEventRecord);
  resolve_optional(handle, "cuStreamWaitEvent", d.cuStreamWaitEvent);
  resolve_optional(handle, "cuEventElapsedTime", d.cuEventElapsedTime);
  resolve_optional(handle, "cuTensorMapEncodeTiled", d.cuTensorMapEncodeTiled);
  resolve_optional(handle, "cuLaunchKernelEx", d.cuLaunchKernelEx);
  resolve_optional(handle, "cuOccupancyMaxActiveClusters", d.cuOccupancyMaxActiveClusters);
  if (CUresult r = d.cuInit(0); r != 0) {
    l.why = "the CUDA driver did not initialize: " + describe_error(d, "cuInit", r);
    return l;
  }
  l.ok = true;
  return l;
}

} // namespace

const Driver* driver(std::string* why) {
  // Once per library path (NOVA_CUDA_DRIVER may name another), never unloaded.
  const Loaded& loaded = detail::load_once<Loaded>("NOVA_CUDA_DRIVER", "libcuda.so.1", load);
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.driver;
}

std::string describe_error(const Driver& d, const char* call, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  if (d.cuGetErrorString) d.cuGetErrorString(r, &text);
  std::string s = std::string(call) + ": " + (name ? name : "CUDA error " + std::to_string(r));
  if (text) s += " (" + std::string(text) + ")";
  return s;
}

} // namespace nova::cuda

namespace nova {

int cuda_device_count() {
  const cuda::Driver* d = cuda::driver();
  int n = 0;
  if (!d || d->cuDeviceGetCount(&n) != 0) return 0;
  return n;
}

bool cuda_available(std::string* why) {
  std::string reason;
  const cuda::Driver* d = cuda::driver(&reason);
  if (d && cuda_device_count() == 0) reason = "the CUDA driver reports no GPU";
  if (reason.empty()) return true;
  if (why) *why = reason;
  return false;
}

int cuda_device() {
  // The variable that names this process's GPU, or its rank on the node.
  const char* from = nullptr;
  const char* value = nullptr;
  for (const char* name : {"NOVA_CUDA_DEVICE", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                           "LOCAL_RANK"})
    if (const char* v = std::getenv(name); v && *v) {
      from = name;
      value = v;
      break;
    }
  if (!from) return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  const int count = cuda_device_count();
  const bool explicit_choice = std::strcmp(from, "NOVA_CUDA_DEVICE") == 0;
  if (*end || n < 0 || n > 1 << 20)
    throw Error(std::string("nova: ") + from + "='" + value + "' is not a device number");
  // A process that sees one GPU uses it whatever its rank (a launcher that
  // binds each task to a GPU of its own, CUDA_VISIBLE_DEVICES per rank).
  if (!explicit_choice && count == 1) return 0;
  if (count > 0 && n >= count)
    throw Error(std::string("nova: ") + from + "=" + value +
                (explicit_choice ? " asks for CUDA device " : " (this process's rank on its node) asks for CUDA device ") +
                std::to_string(n) + ", and the driver reports " + std::to_string(count) +
                (count == 1 ? " GPU" : " GPUs") +
                (explicit_choice ? "" : ": each rank of a data-parallel job on a node needs a GPU of its own "
                                        "(NOVA_CUDA_DEVICE picks one)"));
  return static_cast<int>(n);
}

TargetDesc cuda_device_target(int ordinal) {
  std::string why;
  const cuda::Driver* d = cuda::driver(&why);
  if (!d) throw Error("nova: a CUDA GPU was asked for (NOVA_TARGET=cuda), but there is " + why);
  if (ordinal < 0) ordinal = cuda_device();
  const int count = cuda_device_count();
  if (ordinal < 0 || ordinal >= count)
    throw Error("nova: CUDA device " + std::to_string(ordinal) + " was asked for; the driver reports " +
                std::to_string(count) + (count == 1 ? " GPU" : " GPUs"));
  cuda::CUdevice dev = 0;
  if (cuda::CUresult r = d->cuDeviceGet(&dev, ordinal); r != 0)
    throw Error("nova: " + cuda::describe_error(*d, "cuDeviceGet", r));
  auto attr = [&](int a) {
    int v = 0;
    if (cuda::CUresult r = d->cuDeviceGetAttribute(&v, a, dev); r != 0)
      throw Error("nova: " + cuda::describe_error(*d, "cuDeviceGetAttribute", r) + " (attribute " +
                  std::to_string(a) + ")");
    return v;
  };
  char name[256] = {};
  d->cuDeviceGetName(name, sizeof name - 1, dev);
  const std::string model = name;
  const int cc = attr(cuda::kComputeCapabilityMajor) * 10 + attr(cuda::kComputeCapabilityMinor);
  const bool geforce = model.find("GeForce") != std::string::npos || model.find("RTX") != std::string::npos;
  TargetDesc t = gpu_target(cc, "cuda", model, attr(cuda::kMultiprocessorCount), attr(cuda::kClockRate) / 1000,
                            geforce && cc != 80 && cc < 90);
  t.warp_size = attr(cuda::kWarpSize);
  t.max_threads_per_block = attr(cuda::kMaxThreadsPerBlock);
  t.max_threads_per_sm = attr(cuda::kMaxThreadsPerMultiprocessor);
  t.max_blocks_per_sm = attr(cuda::kMaxBlocksPerMultiprocessor);
  t.smem_per_block = attr(cuda::kMaxSharedMemoryPerBlock);
  t.smem_per_block_optin = attr(cuda::kMaxSharedMemoryPerBlockOptin);
  t.smem_per_sm = attr(cuda::kMaxSharedMemoryPerMultiprocessor);
  t.registers_per_sm = attr(cuda::kMaxRegistersPerMultiprocessor);
  t.registers_per_block = attr(cuda::kMaxRegistersPerBlock);
  t.l2_bytes = attr(cuda::kL2CacheSize);
  // Double data rate: two transfers a clock over the bus.
  t.dram_gb_per_s = std::int64_t(attr(cuda::kMemoryClockRate)) * attr(cuda::kGlobalMemoryBusWidth) * 2 / 8 / 1000000;
  std::size_t bytes = 0;
  if (d->cuDeviceTotalMem(&bytes, dev) == 0) t.memory_bytes = static_cast<std::int64_t>(bytes);
  return t;
}

} // namespace nova
