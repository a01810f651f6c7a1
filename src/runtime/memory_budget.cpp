// memory_budget.cpp - the process-wide arena budget (nova/memory.hpp).
#include "nova/memory.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

#include "nova/error.hpp"

namespace nova {

namespace {

std::uint64_t from_env() {
  const char* v = std::getenv("NOVA_MEMORY_BUDGET");
  if (!v || !*v) return 0;
  std::string s(v);
  std::uint64_t unit = 1;
  switch (s.back()) {
  case 'K': case 'k': unit = std::uint64_t{1} << 10; s.pop_back(); break;
  case 'M': case 'm': unit = std::uint64_t{1} << 20; s.pop_back(); break;
  case 'G': case 'g': unit = std::uint64_t{1} << 30; s.pop_back(); break;
  default: break;
  }
  std::size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size())
    throw Error("nova: NOVA_MEMORY_BUDGET is '" + std::string(v) +
                "'; give bytes, optionally with a K, M or G suffix (e.g. 512M)");
  return static_cast<std::uint64_t>(n) * unit;
}

std::atomic<std::uint64_t>& setting() {
  static std::atomic<std::uint64_t> value{from_env()};
  return value;
}

} // namespace

void set_memory_budget(std::uint64_t bytes) { setting().store(bytes); }

std::uint64_t memory_budget() { return setting().load(); }

} // namespace nova
