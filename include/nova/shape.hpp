// shape.hpp - tensor shapes, numpy broadcasting and their printing.
//
// Shapes are plain vectors of non-negative extents, row-major. The front end
// makes broadcasting explicit (nova.broadcast) with broadcast_shapes().
#pragma once

#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace nova {

using Shape = std::vector<std::int64_t>;

inline std::int64_t numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>{});
}

/// "[4, 3]"; "[]" for a scalar.
inline std::string to_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

/// Row-major strides, in elements.
inline Shape contiguous_strides(const Shape& s) {
  Shape strides(s.size());
  std::int64_t step = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    strides[i] = step;
    step *= s[i];
  }
  return strides;
}

/// numpy broadcasting: align on the right; each pair of dims is equal or one
/// of them is 1. nullopt when the shapes are incompatible.
inline std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

} // namespace nova
