// A pointer is not a value that can key a compiled step: it differs from
// process to process.
// EXPECT: nova::static_arg: a pointer cannot be a static argument
#include <nova/nova.hpp>

void run(nova::Tensor x, const double* scale) {
  auto step = nova::jit([](auto x, auto s) { return x * s; });
#ifdef NOVA_TWIN
  step(x, nova::static_arg(*scale));
#else
  step(x, nova::static_arg(scale));
#endif
}
