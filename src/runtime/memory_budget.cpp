// memory_budget.cpp - the process-wide arena budget (nova/memory.hpp).
#include "nova/memory.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

#include "env_bytes.hpp"

namespace nova {

namespace {

std::atomic<std::uint64_t>& setting() {
  static std::atomic<std::uint64_t> value{detail::bytes_from_env("NOVA_MEMORY_BUDGET")};
  return value;
}

} // namespace

void set_memory_budget(std::uint64_t bytes) { setting().store(bytes); }

std::uint64_t memory_budget() { return setting().load(); }

} // namespace nova
