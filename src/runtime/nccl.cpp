// nccl.cpp - loading NCCL (see nccl.hpp).
#include "nccl.hpp"

#include "dl_library.hpp"

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
  const std::string name = "NCCL (" + path + ")";
  auto resolve = [&](const char* symbol, auto& slot) { return detail::resolve(handle, symbol, slot, l.why, name); };
  l.ok = resolve("ncclGetUniqueId", n.ncclGetUniqueId) & resolve("ncclCommInitRank", n.ncclCommInitRank) &
         resolve("ncclCommDestroy", n.ncclCommDestroy) & resolve("ncclAllReduce", n.ncclAllReduce) &
         resolve("ncclGroupStart", n.ncclGroupStart) & resolve("ncclGroupEnd", n.ncclGroupEnd) &
         resolve("ncclGetErrorString", n.ncclGetErrorString);
  return l; // the handle stays open: a process loads NCCL once
}

} // namespace

const Library* library(std::string* why) {
  const Loaded& loaded = detail::load_once<Loaded>("NOVA_NCCL_LIBRARY", "libnccl.so.2", load);
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.library;
}

std::string describe_error(const Library& l, const char* call, ncclResult r) {
  const char* text = l.ncclGetErrorString ? l.ncclGetErrorString(r) : nullptr;
  return std::string(call) + ": " + (text ? text : "NCCL error") + " (" + std::to_string(r) + ")";
}

} // namespace nova::nccl
