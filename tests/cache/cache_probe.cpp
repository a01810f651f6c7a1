// cache_probe.cpp - one process's view of the caches, for the multi-process
// tests (disk_cache.sh).
//
//   cache_probe run [SEED]    runs a small MLP step once; prints
//                             "PROBE compiles=.. disk_hits=.. warnings=.. checksum=.."
//   cache_probe keys          prints the stable keys of two step types with
//                             equal shapes: "KEYS <hex a> <hex b>"
//
// The checksum is the sum of the output's elements (fixed inputs), printed
// exactly, so every process must print the same one.
#include <nova/nova.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

auto mlp = [](auto x, auto w) { return nova::tanh(nova::matmul(x, w)) * 2.0; };
auto other = [](auto x, auto w) { return nova::relu(nova::matmul(x, w)) * 2.0; };

std::string hex(const std::array<std::uint64_t, 2>& k) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)k[0], (unsigned long long)k[1]);
  return buf;
}

} // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "run";
  std::uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 7;
  nova::Tensor x = nova::Tensor::randn({48, 40}, seed), w = nova::Tensor::randn({40, 24}, seed + 1);
  if (mode == "keys") {
    std::printf("KEYS %s %s\n", hex(nova::jit(mlp).stable_key(x, w)).c_str(),
                hex(nova::jit(other).stable_key(x, w)).c_str());
    return 0;
  }
  nova::Tensor y = nova::jit(mlp)(x, w);
  double sum = 0;
  for (double v : y.to_vector()) sum += v;
  auto s = nova::cache_stats();
  std::printf("PROBE compiles=%llu disk_hits=%llu warnings=%llu checksum=%.17g\n",
              (unsigned long long)s.compiles, (unsigned long long)s.disk_hits,
              (unsigned long long)s.warnings, sum);
  return 0;
}
