// test_memory_plan.cpp - the arena planner (LaunchPlan.h) on random
// lifetimes: no two buffers live at the same time share a byte, offsets are
// aligned, the arena is at least the most bytes live at once and at most
// their sum; and the checker itself catches an overlap.
#include <doctest/doctest.h>

#include "compiler/LaunchPlan.h"
#include "unit/test_seed.hpp"

#include <algorithm>
#include <random>

using mlir::nova::BufferLife;

namespace {

std::vector<BufferLife> randomBuffers(std::mt19937_64 &rng, size_t count, size_t launches) {
  std::vector<BufferLife> buffers;
  for (size_t i = 0; i < count; ++i) {
    size_t a = rng() % launches, b = rng() % launches;
    // Sizes over five orders of magnitude, some not multiples of 64, some 0.
    uint64_t bytes = (rng() % 10 == 0) ? 0 : (uint64_t{1} << (rng() % 20)) + rng() % 100;
    buffers.push_back({bytes, std::min(a, b), std::max(a, b), 0});
  }
  return buffers;
}

} // namespace

TEST_CASE("the arena planner never overlaps buffers that are live together") {
  std::uint64_t seed = nova_test::test_seed();
  INFO("seed = ", seed, " (NOVA_TEST_SEED)");
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    size_t launches = 1 + rng() % 200, count = rng() % 300;
    std::vector<BufferLife> buffers = randomBuffers(rng, count, launches);
    std::vector<uint64_t> offsets;
    uint64_t arena = mlir::nova::placeBuffers(buffers, offsets);
    INFO("trial ", trial, ": ", count, " buffers over ", launches, " launches");
    REQUIRE(offsets.size() == buffers.size());
    CHECK(mlir::nova::checkPlacement(buffers, offsets) == "");
    mlir::nova::MemoryPlan plan = mlir::nova::summarizeMemory(buffers, launches, arena, 8);
    uint64_t total = 0;
    for (const BufferLife &b : buffers)
      total += (b.bytes + 63) / 64 * 64;
    CHECK(arena >= plan.peakLiveBytes);
    CHECK(arena <= total);
    for (size_t i = 0; i < buffers.size(); ++i)
      CHECK(offsets[i] + buffers[i].bytes <= arena);
  }
}

TEST_CASE("without reuse (NOVA_ARENA_REUSE=0) every buffer has bytes of its own") {
  std::vector<BufferLife> buffers{{100, 0, 1, 0}, {64, 2, 3, 0}, {0, 0, 3, 0}, {1, 4, 4, 0}};
  std::vector<uint64_t> offsets;
  CHECK(mlir::nova::placeBuffers(buffers, offsets, /*reuse=*/false) == 128 + 64 + 0 + 64);
  CHECK(offsets == std::vector<uint64_t>{0, 128, 192, 192});
  CHECK(mlir::nova::checkPlacement(buffers, offsets) == "");
  CHECK(mlir::nova::placeBuffers(buffers, offsets) == 100); // with reuse: all start at 0
}

TEST_CASE("the placement check catches overlapping and misaligned buffers") {
  std::vector<BufferLife> buffers{{128, 0, 5, 0}, {64, 3, 9, 0}, {64, 6, 9, 0}};
  CHECK(mlir::nova::checkPlacement(buffers, std::vector<uint64_t>{0, 128, 128}) != "");
  CHECK(mlir::nova::checkPlacement(buffers, std::vector<uint64_t>{0, 64, 192}) != ""); // 0..128 vs 64..128
  CHECK(mlir::nova::checkPlacement(buffers, std::vector<uint64_t>{0, 128, 192}) == "");
  // Buffers 0 and 2 are never live together: one may reuse the other's bytes.
  CHECK(mlir::nova::checkPlacement(buffers, std::vector<uint64_t>{0, 128, 0}) == "");
  CHECK(mlir::nova::checkPlacement(buffers, std::vector<uint64_t>{0, 130, 256}) != ""); // misaligned
  mlir::nova::MemoryPlan plan = mlir::nova::summarizeMemory(buffers, 10, 256, 2);
  CHECK(plan.peakLiveBytes == 192); // launches 3..5: 128 + 64
  CHECK(plan.peakLaunch == 3);
  CHECK(plan.largest == std::vector<size_t>{0, 1});
}
