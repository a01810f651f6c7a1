// cache.hpp - the in-process cache of compiled steps.
//
// Key = the step's type tag (one address per C++ type, fixed at compile time)
// + the execution mode + every argument's dtype and shape + the values of
// declared static arguments. A hit is a hash and a lookup: no trace, no
// compile. Counters let tests prove that.
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
  std::uint64_t misses = 0;   // each miss traces and compiles once
  std::uint64_t traces = 0;
  std::uint64_t compiles = 0;
  std::uint64_t entries = 0;
};

/// Counters since the start of the process (or the last clear_cache()).
CacheStats cache_stats();
/// Drops every entry and zeroes the counters.
void clear_cache();

namespace detail {
std::uint64_t hash_words(const std::vector<std::uint64_t>& words);
std::shared_ptr<Executable> cache_lookup(const CacheKey& key);
void cache_insert(const CacheKey& key, std::shared_ptr<Executable> exe);
void count_trace();
void count_compile();
} // namespace detail

} // namespace nova
