// detail/step_key.hpp - the keys of a step: fast in-process, stable across
// processes; values keyed by value.
//
// In-process key words: the address of a per-type tag (one per C++ type,
// fixed at link time: a few ns to produce), the execution mode, the hash of
// the target steps compile for now (NOVA_TARGET, NOVA_NUM_THREADS, ...), then
// every argument: a tensor's dtype and shape, a static argument's value.
//
// The stable key replaces the tag's address with a hash of the step's C++
// type: its __PRETTY_FUNCTION__ spelling (computed by the C++ compiler,
// constexpr) mixed with its mangled name (which GCC makes distinct for every
// lambda, where the pretty spelling of two `[](int)` lambdas in one function
// is the same) and the file that declares the step (two translation units
// may each have an anonymous-namespace lambda of the same mangled name). It
// is equal in two processes, on two ranks, and after a rebuild of the same
// source, and it differs for two step types however equal their shapes.
//
// Values are keyed by value, never by their bytes: arithmetic types and
// enums by their bit patterns, strings by their characters, structs adapted
// with BOOST_HANA_ADAPT_STRUCT member by member, std::array element by
// element, and other trivially copyable types only if they have no padding
// (std::has_unique_object_representations). A pointer is refused at compile
// time: its value differs from process to process and says nothing about
// what it points to.
#pragma once

#include <array>
#include <bit>
#include <boost/hana/accessors.hpp>
#include <boost/hana/concept/struct.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/pair.hpp>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "nova/cache.hpp"
#include "nova/memory.hpp"
#include "nova/precision.hpp"
#include "nova/tensor.hpp"

namespace nova {

/// The hash of the target steps compile for now (target.cpp): re-read when
/// NOVA_TARGET / NOVA_NUM_THREADS / NOVA_VECTOR_BITS change.
std::uint64_t current_target_hash();

namespace detail {

/// One address per C++ type, fixed at link time: the type part of a key.
/// Deliberately not const: GCC's identical-code folding (-fipa-icf, on at
/// -O2) may merge identical read-only variables, which would give two step
/// types one address and let them share cache entries.
template <class T> inline char type_tag = 0;
template <class T> std::uint64_t type_tag_word() {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&type_tag<T>));
}

constexpr std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 0xcbf29ce484222325ull) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

template <class T> constexpr std::string_view pretty_type_name() { return __PRETTY_FUNCTION__; }

/// The compile-time part of a type's stable hash.
template <class T> inline constexpr std::uint64_t pretty_type_hash = fnv1a(pretty_type_name<T>());

/// A stable hash of type T declared in the file of `where` (see the file comment).
template <class T> std::uint64_t stable_type_hash(const std::source_location& where) {
  return fnv1a(where.file_name(), fnv1a(typeid(T).name(), pretty_type_hash<T>));
}

template <class T> struct is_std_array : std::false_type {};
template <class T, std::size_t N> struct is_std_array<std::array<T, N>> : std::true_type {};

inline void append_bytes(std::vector<std::uint64_t>& words, const void* data, std::size_t n) {
  words.push_back(n);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, static_cast<const char*>(data) + i, std::min<std::size_t>(8, n - i));
    words.push_back(w);
  }
}

/// Appends `v` by value (see the file comment for what is accepted).
template <class T> void append_value(std::vector<std::uint64_t>& words, const T& v) {
  static_assert(!std::is_pointer_v<T> && !std::is_member_pointer_v<T>,
                "nova: a pointer cannot be a static argument or a keyed value: its value differs "
                "from process to process; pass what it points to");
  if constexpr (std::is_same_v<T, bool>) {
    words.push_back(v ? 1 : 0);
  } else if constexpr (std::is_floating_point_v<T>) {
    double d = static_cast<double>(v);
    words.push_back(std::bit_cast<std::uint64_t>(d));
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    words.push_back(static_cast<std::uint64_t>(v));
  } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view>) {
    // The characters (a string_view's own bytes are a pointer: another
    // process, another key).
    append_bytes(words, v.data(), v.size());
  } else if constexpr (is_std_array<T>::value) {
    words.push_back(v.size());
    for (const auto& e : v) append_value(words, e);
  } else if constexpr (boost::hana::Struct<T>::value) {
    boost::hana::for_each(boost::hana::accessors<T>(), [&](auto member) {
      append_value(words, boost::hana::second(member)(v));
    });
  } else {
    static_assert(std::is_trivially_copyable_v<T> && std::has_unique_object_representations_v<T>,
                  "nova: this value cannot be keyed by value: it has padding bytes or floating-"
                  "point members; describe its members with BOOST_HANA_ADAPT_STRUCT(Type, "
                  "member...) (see nova/nn/gpt.hpp)");
    append_bytes(words, &v, sizeof(T));
  }
}

/// A type that append_value accepts, for static_assert messages at the call.
template <class T>
inline constexpr bool keyable_v =
    !std::is_pointer_v<T> && !std::is_member_pointer_v<T> &&
    (std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string> ||
     std::is_same_v<T, std::string_view> ||
     is_std_array<T>::value || boost::hana::Struct<T>::value ||
     (std::is_trivially_copyable_v<T> && std::has_unique_object_representations_v<T>));

inline void append_tensor_key(std::vector<std::uint64_t>& words, const Tensor& t) {
  if (!t.defined()) throw ShapeError("nova: an argument is an undefined (empty) nova::Tensor");
  words.push_back(0x7e50'0000ull | static_cast<std::uint64_t>(t.dtype()));
  words.push_back(static_cast<std::uint64_t>(t.rank()));
  for (auto d : t.shape()) words.push_back(static_cast<std::uint64_t>(d));
}

/// The first words of every step key: type, mode, target.
inline CacheKey key_start(std::uint64_t type_word, std::uint8_t mode) {
  CacheKey key;
  key.words.reserve(32);
  key.words.push_back(type_word);
  key.words.push_back(mode);
  key.words.push_back(current_target_hash());
  key.words.push_back(static_cast<std::uint64_t>(matmul_precision()));
  key.words.push_back(static_cast<std::uint64_t>(activation_precision()));
  key.words.push_back(memory_budget());
  return key;
}

/// 128 bits of a key's words, for the stable key.
inline std::array<std::uint64_t, 2> key_digest(const CacheKey& key) {
  std::vector<std::uint64_t> salted = key.words;
  salted.push_back(0x9e3779b97f4a7c15ull);
  return {hash_words(key.words), hash_words(salted)};
}

} // namespace detail
} // namespace nova
