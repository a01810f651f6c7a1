// main.cpp - a downstream user's program: y = 3 x + 1 through nova::jit,
// checked element by element, then saved ahead of time to argv[1].
#include <nova/aot.hpp>
#include <nova/nova.hpp>

#include <cmath>
#include <cstdio>

int main(int argc, char** argv) {
  auto axpy = nova::jit([](auto x) { return x * 3.0 + 1.0; });
  nova::Tensor x = nova::Tensor::randn({1000}, 42);
  nova::Tensor y = axpy(x);
  auto xs = x.to_vector(), ys = y.to_vector();
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (std::abs(ys[i] - (3.0 * float(xs[i]) + 1.0)) > 1e-5) {
      std::printf("downstream: wrong result at %zu\n", i);
      return 1;
    }
  if (argc > 1) nova::aot::save(*axpy.executable(x), argv[1]);
  std::printf("downstream: OK (%s)\n", axpy.executable(x)->kind().c_str());
  return 0;
}
