// testing.hpp - helpers shared by Nova's unit tests.
//
// compare(): runs one step compiled and interpreted (the float64 reference)
// and returns the normwise relative error max|a - b| / max(max|b|, tiny).
#pragma once

#include <doctest/doctest.h>

#include <nova/nova.hpp>

#include "test_seed.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace nova_test {

/// Built with AddressSanitizer (GCC's -fsanitize=address; NOVA_SANITIZE):
/// tests whose repetitions differ only in their data, not in the code they
/// run, do fewer of them there (the sanitizers look for memory errors, the
/// normal build checks the numbers).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

/// A number unlike any other call's (std::random_device): for names that
/// must not collide (temporary directories), never for test data.
inline std::uint64_t unique_number() {
  static std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) | rd();
}

inline double rel_error(const nova::Tensor& got, const nova::Tensor& want) {
  auto a = got.to_vector(), b = want.to_vector();
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

/// Runs `f` compiled and interpreted on the same inputs; checks shapes agree
/// and returns the relative error of the compiled result.
template <class F, class... Args>
double compare(F f, const Args&... args) {
  auto compiled = nova::jit(f);
  auto reference = nova::jit(f, nova::ExecMode::interpreted);
  nova::Tensor got = compiled(args...);
  nova::Tensor want = reference(args...);
  REQUIRE(got.spec() == want.spec());
  return rel_error(got, want);
}

/// Random inputs from the suite's seed (test_seed.hpp: fixed, or
/// NOVA_TEST_SEED); tests print it with INFO(gen.seed).
/// Each Gen's stream is the suite's seed mixed with the file and line that
/// construct it: two Gens never repeat each other's inputs, and a test run
/// alone (doctest -tc) sees the same inputs as in the whole suite.
struct Gen {
  explicit Gen(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : seed(mix(test_seed(), file, line)) {}
  std::uint64_t seed;
  std::uint64_t count = 0;
  static std::uint64_t mix(std::uint64_t seed, const char* file, unsigned line) {
    std::uint64_t h = 1469598103934665603ull; // FNV-1a of the file name
    for (const char* c = file; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
    return seed ^ (h + 0x9e3779b97f4a7c15ull * line);
  }
  nova::Tensor randn(const nova::Shape& s, nova::DType t = nova::DType::f32) {
    return nova::Tensor::randn(s, seed + count++, t);
  }
  /// Uniform in [0.5, 2): inputs for log, sqrt, rsqrt and divisors.
  nova::Tensor positive(const nova::Shape& s, nova::DType t = nova::DType::f32) {
    return nova::Tensor::uniform(s, seed + count++, 0.5, 2.0, t);
  }
};

/// i32 class labels for `rows` [...] of `classes` classes, spread over the
/// classes, every fifth one outside [0, classes) (-1, then `classes`): the
/// rows a cross-entropy ignores.
inline nova::Tensor class_labels(const nova::Shape& rows, std::int64_t classes) {
  nova::Tensor y = nova::Tensor::zeros(rows, nova::DType::i32);
  auto v = y.span<std::int32_t>();
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<std::int32_t>(i % 5 == 4 ? (i % 10 == 4 ? -1 : classes)
                                                : static_cast<std::int64_t>(i * 7 + 3) % classes);
  return y;
}

/// fp32 compiled vs float64 reference on the same (fp32-rounded) inputs.
constexpr double kF32Tol = 1e-5;
/// fp64 compiled vs float64 reference: only reassociation and libm differ.
constexpr double kF64Tol = 1e-12;

} // namespace nova_test
