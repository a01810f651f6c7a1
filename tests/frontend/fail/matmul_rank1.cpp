// A statically rank-1 operand cannot be a matmul operand.
// EXPECT: nova::matmul: the left operand must have rank >= 2
#include <nova/nova.hpp>

auto f(nova::Vector<float> v, nova::Matrix<float> m) {
#ifdef NOVA_TWIN
  return nova::matmul(nova::reshape(v, {1, -1}), m);
#else
  return nova::matmul(v, m);
#endif
}
