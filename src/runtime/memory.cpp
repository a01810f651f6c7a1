// memory.cpp - aligned buffers, huge pages for large ones (memory.hpp).
#include "memory.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <string>

#include "nova/error.hpp"

namespace nova::detail {

namespace {
constexpr std::size_t kLine = 64;
constexpr std::size_t kHuge = std::size_t{2} << 20;
} // namespace

void* allocate_buffer(std::size_t bytes) {
  std::size_t align = bytes >= kHuge ? kHuge : kLine;
  std::size_t size = (std::max<std::size_t>(bytes, 1) + kLine - 1) / kLine * kLine;
  void* p = nullptr;
  if (::posix_memalign(&p, align, size) != 0 || !p)
    throw Error("nova: out of memory allocating " + std::to_string(bytes) + " bytes");
  // Only the whole huge pages inside the buffer: a huge page over its tail
  // would count up to 2 MiB more of resident memory per buffer.
  if (align == kHuge) ::madvise(p, size / kHuge * kHuge, MADV_HUGEPAGE); // advice: failure is harmless
  return p;
}

void free_buffer(void* p) { std::free(p); }

} // namespace nova::detail
