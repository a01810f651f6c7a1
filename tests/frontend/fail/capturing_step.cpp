// A step that captures a value could change its trace without changing its
// cache key, so nova::jit rejects it.
// EXPECT: nova::jit: the step must not capture anything
#include <nova/nova.hpp>

int main() {
  int layers = 3;
#ifdef NOVA_TWIN
  auto step = nova::jit([](auto x, int n) { return n > 1 ? nova::tanh(x) : x; });
  (void)layers;
#else
  auto step = nova::jit([layers](auto x) { return layers > 1 ? nova::tanh(x) : x; });
#endif
  (void)step;
}
