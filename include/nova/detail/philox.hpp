// detail/philox.hpp - Philox4x32-10, the counter-based generator behind
// nova::dropout (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11; the same generator as cuRAND's and JAX's).
//
// This is the reference the compiler's lowering of nova.dropout reproduces
// bit for bit with arith ops, and what the interpreter runs: element i of a
// dropout with seed s and stream t keeps its value iff uniform(s, t, i) >=
// rate. No state: any element of any step can be recomputed alone, which is
// how the backward pass gets the forward's mask.
#pragma once

#include <cstdint>

namespace nova::detail {

inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

/// The first 32-bit output word of Philox4x32-10 for counter (index, 0) and
/// key (seed low word, seed high word ^ stream).
constexpr std::uint32_t philox_word(std::uint64_t seed, std::uint32_t stream, std::uint64_t index) {
  std::uint32_t c0 = static_cast<std::uint32_t>(index), c1 = static_cast<std::uint32_t>(index >> 32);
  std::uint32_t c2 = 0, c3 = 0;
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32) ^ stream;
  for (int round = 0; round < 10; ++round) {
    std::uint64_t p0 = std::uint64_t{kPhiloxM0} * c0, p1 = std::uint64_t{kPhiloxM1} * c2;
    std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    std::uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return c0;
}

/// Uniform in [0, 1) with 24 bits: exact in float and double alike.
constexpr double philox_uniform(std::uint64_t seed, std::uint32_t stream, std::uint64_t index) {
  return static_cast<double>(philox_word(seed, stream, index) >> 8) * (1.0 / 16777216.0);
}

} // namespace nova::detail
