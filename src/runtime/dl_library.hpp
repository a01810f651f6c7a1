// dl_library.hpp - a shared library the runtime resolves at run time
// (dlopen, never linked): the CUDA driver, NCCL. Each is loaded once per
// path for the process and its handle kept open.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

namespace nova::detail {

/// `slot` = `symbol` of `handle`; if it has none, `why` names it (once).
template <typename F>
bool resolve(void* handle, const char* symbol, F& slot, std::string& why, const std::string& library) {
  slot = reinterpret_cast<F>(dlsym(handle, symbol));
  if (!slot && why.empty()) why = library + " has no " + symbol;
  return slot != nullptr;
}

/// `slot` = `symbol` of `handle`, or null: a call older libraries lack.
template <typename F>
void resolve_optional(void* handle, const char* symbol, F& slot) {
  slot = reinterpret_cast<F>(dlsym(handle, symbol));
}

/// `load(path)` once per path, `path` the environment variable `env` or else
/// `default_path`; the result lives as long as the process.
template <typename Loaded>
const Loaded& load_once(const char* env, const char* default_path, Loaded (*load)(const std::string&)) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Loaded>> loaded_by_path;
  const char* override_path = std::getenv(env);
  const std::string path = override_path && *override_path ? override_path : default_path;
  std::lock_guard<std::mutex> lock(mutex);
  auto& entry = loaded_by_path[path];
  if (!entry) entry = std::make_unique<Loaded>(load(path));
  return *entry;
}

} // namespace nova::detail
