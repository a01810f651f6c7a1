// memory.hpp - how the runtime allocates tensor storage and arenas.
//
// 64-byte aligned (a cache line, an AVX-512 vector). Buffers of 2 MiB or more
// are 2 MiB aligned and their whole 2 MiB pages advised as transparent huge
// pages (MADV_HUGEPAGE, for systems with THP "madvise", the usual default): kernels that
// walk a matrix by columns (a transposed operand, a packed panel) touch a
// new 4 KiB page every row, and huge pages keep those walks in the TLB.
// Private to the runtime.
#pragma once

#include <cstddef>

namespace nova::detail {

/// Throws nova::Error when out of memory. Free with free_buffer().
void* allocate_buffer(std::size_t bytes);
void free_buffer(void* p);

} // namespace nova::detail
