// cache.cpp - the process-wide cache of executables and its counters.
//
// One mutex guards the map; counters are atomics so tests can read them
// while other threads run steps.
#include "nova/cache.hpp"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace nova {
namespace {

struct KeyHash {
  std::size_t operator()(const CacheKey& k) const { return detail::hash_words(k.words); }
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<CacheKey, std::shared_ptr<Executable>, KeyHash> entries;
  std::atomic<std::uint64_t> hits{0}, misses{0}, traces{0}, compiles{0};
};

/// Never destroyed: executables own JIT-compiled code whose teardown needs
/// LLVM's globals, which may already be gone when statics are destroyed at
/// exit. The OS reclaims everything at exit anyway.
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

std::shared_ptr<Executable> cache_lookup(const CacheKey& key) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  auto it = c.entries.find(key);
  if (it == c.entries.end()) {
    ++c.misses;
    return nullptr;
  }
  ++c.hits;
  return it->second;
}

void cache_insert(const CacheKey& key, std::shared_ptr<Executable> exe) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  c.entries[key] = std::move(exe);
}

void count_trace() { ++cache().traces; }
void count_compile() { ++cache().compiles; }

} // namespace detail

CacheStats cache_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return {c.hits, c.misses, c.traces, c.compiles, c.entries.size()};
}

void clear_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  c.entries.clear();
  c.hits = c.misses = c.traces = c.compiles = 0;
}

} // namespace nova
