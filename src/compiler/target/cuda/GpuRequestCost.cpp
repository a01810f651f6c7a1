//===- GpuRequestCost.cpp - what a warp's memory request costs -----------===//

#include "compiler/target/cuda/GpuRequestCost.h"

#include <algorithm>
#include <array>
#include <vector>

using namespace mlir::nova;

namespace {

constexpr int64_t kBanks = 32, kBankBytes = 4, kSectorBytes = 32;

/// One shared request of `chunk` bytes a lane (1, 2, 4, 8 or 16) at
/// `offset` past each lane's address.
RequestCost chunkCost(std::span<const int64_t> lanes, int64_t chunk, int64_t offset) {
  const int64_t phaseLanes = chunk <= 4 ? 32 : chunk == 8 ? 16 : 8;
  RequestCost cost;
  for (size_t first = 0; first < lanes.size(); first += size_t(phaseLanes)) {
    // The distinct words each bank holds in this phase (at most 32, since a
    // phase touches at most 128 bytes' worth of words a lane).
    std::array<std::array<int64_t, 32>, kBanks> words;
    std::array<int64_t, kBanks> counts{};
    bool any = false;
    for (size_t l = first; l < std::min(lanes.size(), first + size_t(phaseLanes)); ++l) {
      if (lanes[l] < 0)
        continue;
      any = true;
      const int64_t begin = lanes[l] + offset, end = begin + chunk;
      for (int64_t word = begin / kBankBytes; word * kBankBytes < end; ++word) {
        auto &list = words[size_t(word % kBanks)];
        auto &n = counts[size_t(word % kBanks)];
        if (std::find(list.begin(), list.begin() + n, word) == list.begin() + n && n < int64_t(list.size()))
          list[size_t(n++)] = word;
      }
    }
    if (!any)
      continue;
    const int64_t degree = *std::max_element(counts.begin(), counts.end());
    cost.taken += degree;
    cost.ideal += 1;
    cost.worstDegree = std::max(cost.worstDegree, degree);
  }
  return cost;
}

} // namespace

void AccessCost::add(const RequestCost &c) {
  requests += 1;
  taken += c.taken;
  ideal += c.ideal;
  worstDegree = std::max(worstDegree, c.worstDegree);
}

void AccessCost::merge(const AccessCost &other) {
  requests += other.requests;
  taken += other.taken;
  ideal += other.ideal;
  worstDegree = std::max(worstDegree, other.worstDegree);
}

RequestCost mlir::nova::sharedRequestCost(std::span<const int64_t> lanes, int64_t bytes) {
  const bool power = bytes > 0 && (bytes & (bytes - 1)) == 0;
  const int64_t chunk = bytes > 16 && bytes % 16 == 0 ? 16 : power && bytes <= 16 ? bytes : 4;
  RequestCost cost;
  for (int64_t offset = 0; offset < bytes; offset += chunk) {
    RequestCost part = chunkCost(lanes, std::min(chunk, bytes - offset), offset);
    cost.taken += part.taken;
    cost.ideal += part.ideal;
    cost.worstDegree = std::max(cost.worstDegree, part.worstDegree);
  }
  return cost;
}

RequestCost mlir::nova::globalRequestCost(std::span<const int64_t> lanes, int64_t bytes) {
  // The lanes' byte ranges, merged: their union's sectors and bytes.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t a : lanes)
    if (a >= 0)
      ranges.emplace_back(a, a + bytes);
  RequestCost cost;
  if (ranges.empty())
    return cost;
  std::sort(ranges.begin(), ranges.end());
  int64_t uniqueBytes = 0, sectors = 0, lastSector = -1;
  int64_t begin = ranges[0].first, end = ranges[0].second;
  auto close = [&] {
    uniqueBytes += end - begin;
    const int64_t first = std::max(begin / kSectorBytes, lastSector + 1), last = (end - 1) / kSectorBytes;
    if (last >= first)
      sectors += last - first + 1;
    lastSector = std::max(lastSector, last);
  };
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first <= end) {
      end = std::max(end, ranges[i].second);
      continue;
    }
    close();
    begin = ranges[i].first;
    end = ranges[i].second;
  }
  close();
  cost.taken = sectors;
  cost.ideal = (uniqueBytes + kSectorBytes - 1) / kSectorBytes;
  cost.worstDegree = 1;
  return cost;
}
