// cache.cpp - the process-wide cache of executables and its counters.
//
// One mutex guards the map; a key being compiled has an in-flight entry
// (a shared future) so concurrent misses wait for one compile instead of
// starting their own. Counters are atomics so tests can read them while
// other threads run steps.
#include "nova/cache.hpp"

#include <atomic>
#include <future>
#include <mutex>
#include <unordered_map>

namespace nova {
namespace {

struct KeyHash {
  std::size_t operator()(const CacheKey& k) const { return detail::hash_words(k.words); }
};

using Future = std::shared_future<std::shared_ptr<Executable>>;

struct Cache {
  std::mutex mutex;
  std::unordered_map<CacheKey, std::shared_ptr<Executable>, KeyHash> entries;
  std::unordered_map<CacheKey, Future, KeyHash> in_flight;
  std::atomic<std::uint64_t> hits{0}, misses{0}, traces{0}, compiles{0}, disk_hits{0},
      disk_writes{0}, warnings{0}, compiles_in_child{0}, compile_peak_bytes{0};
};

/// Never destroyed: executables may be used by static objects' destructors
/// at exit; the OS reclaims everything then anyway.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

} // namespace

namespace detail {

std::uint64_t hash_words(const std::vector<std::uint64_t>& words) {
  // FNV-1a over 64-bit words, then a final avalanche (splitmix64).
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (auto w : words) {
    h ^= w;
    h *= 0x100000001b3ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

std::shared_ptr<Executable> cache_get_or_compile(const CacheKey& key,
                                                 const std::function<std::shared_ptr<Executable>()>& compile) {
  Cache& c = cache();
  std::promise<std::shared_ptr<Executable>> promise;
  {
    std::unique_lock lock(c.mutex);
    if (auto it = c.entries.find(key); it != c.entries.end()) {
      ++c.hits;
      return it->second;
    }
    ++c.misses;
    if (auto it = c.in_flight.find(key); it != c.in_flight.end()) {
      Future f = it->second;
      lock.unlock();
      return f.get(); // rethrows the compiling thread's exception
    }
    c.in_flight.emplace(key, promise.get_future().share());
  }
  std::shared_ptr<Executable> exe;
  try {
    exe = compile();
  } catch (...) {
    std::lock_guard lock(c.mutex);
    promise.set_exception(std::current_exception());
    c.in_flight.erase(key);
    throw;
  }
  std::lock_guard lock(c.mutex);
  c.entries[key] = exe;
  promise.set_value(exe);
  c.in_flight.erase(key);
  return exe;
}

void count_trace() { ++cache().traces; }
void count_compile() { ++cache().compiles; }
void count_disk_hit() { ++cache().disk_hits; }
void count_disk_write() { ++cache().disk_writes; }
void count_warning() { ++cache().warnings; }
void count_child_compile(std::uint64_t bytes) {
  Cache& c = cache();
  ++c.compiles_in_child;
  std::uint64_t seen = c.compile_peak_bytes.load();
  while (bytes > seen && !c.compile_peak_bytes.compare_exchange_weak(seen, bytes)) {
  }
}

} // namespace detail

CacheStats cache_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return {c.hits,       c.misses,      c.traces,   c.compiles,          c.entries.size(),
          c.disk_hits,  c.disk_writes, c.warnings, c.compiles_in_child, c.compile_peak_bytes};
}

void clear_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  c.entries.clear();
  c.hits = c.misses = c.traces = c.compiles = c.disk_hits = c.disk_writes = c.warnings = 0;
  c.compiles_in_child = c.compile_peak_bytes = 0;
}

} // namespace nova
