// test_seed.hpp - the seed every random test starts from.
//
// Fixed by default, so a failure replays exactly; NOVA_TEST_SEED=<n> runs
// the suite on other inputs (tests print the seed they used on failure:
// INFO("seed = ", ...)). Header-only and free of Nova, for both test
// binaries.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace nova_test {

inline constexpr std::uint64_t kDefaultTestSeed = 20261201;

/// NOVA_TEST_SEED if set (decimal or 0x hex), else kDefaultTestSeed.
inline std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("NOVA_TEST_SEED");
    if (!env || !*env) return kDefaultTestSeed;
    try {
      return static_cast<std::uint64_t>(std::stoull(env, nullptr, 0));
    } catch (...) {
      return kDefaultTestSeed;
    }
  }();
  return seed;
}

} // namespace nova_test
