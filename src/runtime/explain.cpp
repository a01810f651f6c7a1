// explain.cpp - the process-wide NOVA_EXPLAIN switch (nova/explain.hpp).
#include "nova/explain.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace nova {

namespace {
std::atomic<int>& setting() { // -1: not set, follow the environment
  static std::atomic<int> value{-1};
  return value;
}
} // namespace

void set_explain(bool on) { setting().store(on ? 1 : 0); }

bool explain_enabled() {
  int v = setting().load();
  if (v >= 0) return v == 1;
  const char* env = std::getenv("NOVA_EXPLAIN");
  return env && *env && std::strcmp(env, "0") != 0;
}

} // namespace nova
