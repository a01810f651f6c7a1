// bytes.hpp - little-endian byte strings for the runtime's file formats.
//
// ByteWriter appends fixed-width integers and length-prefixed strings;
// ByteReader reads them back and throws nova::FormatError, naming what was
// being read, the moment a read would pass the end or a count is absurd, so a
// truncated or corrupt input is an error message, never a crash or a huge
// allocation. Private to the runtime.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nova/error.hpp"

namespace nova::detail {

class ByteWriter {
 public:
  template <class T> void put(T v) {
    static_assert(std::is_integral_v<T> || std::is_enum_v<T>);
    auto u = static_cast<std::uint64_t>(v);
    for (std::size_t i = 0; i < sizeof(T); ++i) bytes_.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
  }
  void put_string(const std::string& s) {
    put<std::uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void put_bytes(std::span<const std::uint8_t> b) {
    put<std::uint64_t>(b.size());
    bytes_.insert(bytes_.end(), b.begin(), b.end());
  }
  void put_raw(const void* data, std::size_t n) {
    auto p = static_cast<const std::uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  std::vector<std::uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

class ByteReader {
 public:
  ByteReader(std::span<const std::uint8_t> bytes, std::string what)
      : bytes_(bytes), what_(std::move(what)) {}

  template <class T> T get(const char* field) {
    need(sizeof(T), field);
    std::uint64_t u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) u |= std::uint64_t(bytes_[pos_ + i]) << (8 * i);
    pos_ += sizeof(T);
    return static_cast<T>(u);
  }
  /// A count of items that each take at least `min_item_bytes`: refused if
  /// the rest of the input could not hold that many.
  std::uint64_t count(const char* field, std::size_t min_item_bytes = 1) {
    auto n = get<std::uint64_t>(field);
    if (min_item_bytes > 0 && n > remaining() / min_item_bytes)
      fail(std::string(field) + " count " + std::to_string(n) + " exceeds the remaining " +
           std::to_string(remaining()) + " bytes");
    return n;
  }
  std::string get_string(const char* field) {
    auto n = count(field);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  std::vector<std::uint8_t> get_bytes(const char* field) {
    auto n = count(field);
    std::vector<std::uint8_t> b(bytes_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                bytes_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return b;
  }
  void get_raw(void* out, std::size_t n, const char* field) {
    need(n, field);
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
  }
  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return bytes_.size() - pos_; }
  [[noreturn]] void fail(const std::string& why) const {
    throw FormatError(what_ + ": " + why + " (at byte " + std::to_string(pos_) + ")");
  }

 private:
  void need(std::size_t n, const char* field) const {
    if (n > remaining())
      fail(std::string("truncated while reading ") + field + " (" + std::to_string(n) +
           " bytes needed, " + std::to_string(remaining()) + " left)");
  }

  std::span<const std::uint8_t> bytes_;
  std::string what_;
  std::size_t pos_ = 0;
};

} // namespace nova::detail
