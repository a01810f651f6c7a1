// tensor_map.cpp - see tensor_map.hpp (the limits: cuda.h's
// cuTensorMapEncodeTiled documentation).
#include "tensor_map.hpp"

namespace nova::detail {

std::string tensor_map_problem(std::span<const std::uint64_t> dims, std::span<const std::uint64_t> strides,
                               std::span<const std::uint64_t> box, std::uint64_t element_bytes,
                               std::uint64_t swizzle_bytes) {
  const std::size_t rank = dims.size();
  if (rank < 1 || rank > 5 || box.size() != rank || strides.size() + 1 != rank)
    return "it has " + std::to_string(rank) + " dims, " + std::to_string(box.size()) + " box extents and " +
           std::to_string(strides.size()) + " strides (rank 1 to 5, one stride fewer)";
  if (swizzle_bytes != 0 && swizzle_bytes != 32 && swizzle_bytes != 64 && swizzle_bytes != 128)
    return "a " + std::to_string(swizzle_bytes) + "-byte swizzle (0, 32, 64 or 128)";
  for (std::size_t d = 0; d < rank; ++d) {
    if (dims[d] < 1 || dims[d] > (std::uint64_t{1} << 32) || box[d] < 1 || box[d] > 256)
      return "dimension " + std::to_string(d) + " or its box is out of range (1 to 2^32, box 1 to 256)";
    if (d > 0 && (strides[d - 1] % 16 != 0 || strides[d - 1] >= (std::uint64_t{1} << 40)))
      return "stride " + std::to_string(d) + " of " + std::to_string(strides[d - 1]) +
             " bytes is not a multiple of 16 below 2^40";
  }
  const std::uint64_t row = box[0] * element_bytes;
  if (row % 16 != 0 || (swizzle_bytes != 0 && row > swizzle_bytes))
    return "a box row of " + std::to_string(row) + " bytes (a multiple of 16, at most the " +
           std::to_string(swizzle_bytes) + "-byte swizzle)";
  return "";
}

} // namespace nova::detail
