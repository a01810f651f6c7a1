// runner.cpp - runs the saved step with Nova's runtime only (no compiler).
#include <nova/aot.hpp>

#include <cmath>
#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  auto exe = nova::aot::load(argv[1]);
  nova::Tensor x = nova::Tensor::full({1000}, 2.0);
  std::vector<nova::Tensor> out = (*exe)(std::vector<nova::Tensor>{x});
  bool ok = out.size() == 1 && out[0].at({999}) == 7.0;
  std::printf("downstream_runner: %s\n", ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}
