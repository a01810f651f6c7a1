// env_bytes.hpp - a size in bytes from an environment variable ("512M"),
// for NOVA_MEMORY_BUDGET and NOVA_GPU_MEMORY. Private to the runtime.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "nova/error.hpp"

namespace nova::detail {

/// The variable `name`'s bytes, optionally with a K, M or G suffix (powers
/// of 1024); 0 when it is unset or empty; a nova::Error naming the
/// variable and its value when it is not such a number.
inline std::uint64_t bytes_from_env(const char* name) {
  const char* v = std::getenv(name);
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
    // Digits only: stoull would take a sign ("-1" as 2^64 - 1).
    if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) n = std::stoull(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || n > (~std::uint64_t{0}) / unit)
    throw Error("nova: " + std::string(name) + " is '" + std::string(v) +
                "'; give bytes, optionally with a K, M or G suffix (e.g. 512M)");
  return static_cast<std::uint64_t>(n) * unit;
}

} // namespace nova::detail
