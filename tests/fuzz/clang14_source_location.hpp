// clang14_source_location.hpp - std::source_location for the libFuzzer build.
//
// Debian 12's only libFuzzer is clang 14's, and clang 14 lacks the builtin
// (__builtin_source_location) that libstdc++ 12's <source_location> needs,
// so that header declares nothing there. The readers' headers use
// std::source_location in error paths; this stand-in (forced first with
// -include by tests/fuzz/libfuzzer.sh, never used by the real builds) gives
// them one from clang 14's older __builtin_FILE / __builtin_LINE.
#pragma once

#include <version>

#if !defined(__cpp_lib_source_location) && !__has_builtin(__builtin_source_location)
namespace std {
struct source_location {
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           unsigned line = __builtin_LINE(),
                                           unsigned column = __builtin_COLUMN()) noexcept {
    source_location l;
    l.file_ = file;
    l.function_ = function;
    l.line_ = line;
    l.column_ = column;
    return l;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr unsigned line() const noexcept { return line_; }
  constexpr unsigned column() const noexcept { return column_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  unsigned line_ = 0;
  unsigned column_ = 0;
};
} // namespace std
#endif
