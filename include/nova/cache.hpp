// cache.hpp - the in-process cache of compiled steps, and its counters.
//
// Key = the step's type tag (one address per C++ type, fixed at link time)
// + the execution mode + the target's hash + every argument's dtype and
// shape + the values of declared static arguments. A hit is a hash and a
// lookup: no trace, no compile. Threads that miss on one key at the same
// time compile it once: the first compiles, the others wait for its result.
// Behind it sits the on-disk cache (NOVA_CACHE, NOVA_CACHE_DIR): a miss
// traces, and a step another process compiled is loaded instead of compiled.
// The counters let tests prove all of this.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "nova/executable.hpp"

namespace nova {

struct CacheKey {
  std::vector<std::uint64_t> words;
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

struct CacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;      // each miss traces once
  std::uint64_t traces = 0;
  std::uint64_t compiles = 0;    // steps actually compiled (not found on disk)
  std::uint64_t entries = 0;
  std::uint64_t disk_hits = 0;   // steps loaded from the on-disk cache
  std::uint64_t disk_writes = 0; // entries published to it
  std::uint64_t warnings = 0;    // "nova: warning:" lines printed
  std::uint64_t compiles_in_child = 0;  // of `compiles`, those done by a nova-compile process
  std::uint64_t compile_peak_bytes = 0; // the largest peak resident size of such a process
};

/// Counters since the start of the process (or the last clear_cache()).
CacheStats cache_stats();
/// Drops every in-process entry and zeroes the counters (the disk cache stays).
void clear_cache();

namespace detail {
std::uint64_t hash_words(const std::vector<std::uint64_t>& words);
/// The executable for `key`; on a miss, `compile()`'s result, computed once
/// however many threads ask at the same time. If compile() throws, every
/// waiting thread gets the same exception and nothing is cached.
std::shared_ptr<Executable> cache_get_or_compile(const CacheKey& key,
                                                 const std::function<std::shared_ptr<Executable>()>& compile);
void count_trace();
void count_compile();
void count_disk_hit();
void count_disk_write();
void count_warning();
/// A compile done in a child process whose peak resident size was `bytes`.
void count_child_compile(std::uint64_t bytes);
} // namespace detail

} // namespace nova
