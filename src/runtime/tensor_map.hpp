// tensor_map.hpp - what cuTensorMapEncodeTiled accepts of a tiled TMA tensor
// map, checked in one place: by ExecutableDesc::validate (a description's
// maps, before any driver sees them) and by the GPU emulator (the maps a
// launch gives a kernel), so that neither accepts a map the other, or the
// driver, would refuse.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace nova::detail {

/// Why cuTensorMapEncodeTiled would refuse a map of `dims` (elements per
/// dimension, fastest first), `strides` (bytes between consecutive indices
/// of dimensions 1, 2, ...), `box` (elements a load copies per dimension),
/// elements of `element_bytes`, box rows swizzled by `swizzle_bytes` (0, 32,
/// 64 or 128); empty when it would take it.
std::string tensor_map_problem(std::span<const std::uint64_t> dims, std::span<const std::uint64_t> strides,
                               std::span<const std::uint64_t> box, std::uint64_t element_bytes,
                               std::uint64_t swizzle_bytes);

} // namespace nova::detail
