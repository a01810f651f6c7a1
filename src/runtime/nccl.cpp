// nccl.cpp - loading NCCL (see nccl.hpp).
#include "nccl.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

namespace nova::nccl {
namespace {

struct Loaded {
  Library library;
  bool ok = false;
  std::string why;
};

Loaded load(const std::string& path) {
  Loaded l;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    l.why = "no NCCL: " + path + " cannot be loaded (" + (err ? err : "unknown error") +
            "); data-parallel training on GPUs needs NVIDIA's NCCL (NOVA_NCCL_LIBRARY names another path)";
    return l;
  }
  Library& n = l.library;
  auto resolve = [&](const char* symbol, auto& slot) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, symbol));
    if (!slot && l.why.empty()) l.why = "NCCL (" + path + ") has no " + symbol;
    return slot != nullptr;
  };
  l.ok = resolve("ncclGetUniqueId", n.ncclGetUniqueId) & resolve("ncclCommInitRank", n.ncclCommInitRank) &
         resolve("ncclCommDestroy", n.ncclCommDestroy) & resolve("ncclAllReduce", n.ncclAllReduce) &
         resolve("ncclGroupStart", n.ncclGroupStart) & resolve("ncclGroupEnd", n.ncclGroupEnd) &
         resolve("ncclGetErrorString", n.ncclGetErrorString);
  return l; // the handle stays open: a process loads NCCL once
}

} // namespace

const Library* library(std::string* why) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Loaded>> loaded_by_path;
  const char* override_path = std::getenv("NOVA_NCCL_LIBRARY");
  const std::string path = override_path && *override_path ? override_path : "libnccl.so.2";
  std::lock_guard<std::mutex> lock(mutex);
  auto& entry = loaded_by_path[path];
  if (!entry) entry = std::make_unique<Loaded>(load(path));
  if (!entry->ok) {
    if (why) *why = entry->why;
    return nullptr;
  }
  return &entry->library;
}

std::string describe_error(const Library& l, const char* call, ncclResult r) {
  const char* text = l.ncclGetErrorString ? l.ncclGetErrorString(r) : nullptr;
  return std::string(call) + ": " + (text ? text : "NCCL error") + " (" + std::to_string(r) + ")";
}

} // namespace nova::nccl
