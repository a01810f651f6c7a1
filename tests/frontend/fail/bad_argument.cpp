// Step arguments are tensors or declared static arguments, nothing else.
// EXPECT: every argument of a step must be a nova::Tensor or a nova::static_arg(value)
#include <nova/nova.hpp>

void run(nova::Tensor x) {
  auto step = nova::jit([](auto x, auto scale) { return x * scale; });
#ifdef NOVA_TWIN
  step(x, nova::static_arg(2.0));
#else
  step(x, 2.0);
#endif
}
