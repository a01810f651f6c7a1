// dtype.hpp - element types a nova::Tensor can hold.
//
// The runtime, the front end and the compiler share this enum; the C++ type
// of each element type is mapped both ways so templates can check dtypes at
// compile time (see expr/expr.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace nova {

enum class DType : std::uint8_t { f32, f64, i32, i64 };

constexpr std::size_t size_of(DType t) {
  switch (t) {
  case DType::f32: return 4;
  case DType::f64: return 8;
  case DType::i32: return 4;
  case DType::i64: return 8;
  }
  return 0;
}

constexpr std::string_view name_of(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  case DType::i32: return "i32";
  case DType::i64: return "i64";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }

/// The element type of a C++ type; `void` stands for "not known statically".
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

template <class T>
concept element_type = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                       std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;

} // namespace nova
