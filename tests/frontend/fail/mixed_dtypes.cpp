// Statically different element types do not mix.
// EXPECT: nova: the operands of an elementwise op have different element types
#include <nova/nova.hpp>

auto f(nova::Matrix<float> a, nova::Matrix<double> b, nova::Matrix<float> c) {
#ifdef NOVA_TWIN
  return a + c;
#else
  return a + b;
#endif
}
