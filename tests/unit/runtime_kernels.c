/* runtime_kernels.c - hand-written kernels with the runtime's entry ABI
 * (void nova_<k>(int64_t workgroup, void* const* args)), built as a shared
 * object, so the runtime's loader, launch plan, arena and thread pool are
 * tested without the compiler (test_executable_desc.cpp). */
#include <stdint.h>

enum { N = 1000, PER_GROUP = 100 };

/* args: in f32[N], tmp f32[N]: tmp = 2 in + 1, workgroup w owns [100w, 100w + 100). */
void nova_scale(int64_t wg, void* const* args) {
  const float* in = args[0];
  float* tmp = args[1];
  for (int64_t i = wg * PER_GROUP; i < (wg + 1) * PER_GROUP; ++i) tmp[i] = 2.0f * in[i] + 1.0f;
}

/* args: tmp f32[N], in f32[N], out f32[N]: out = tmp + in. */
void nova_add(int64_t wg, void* const* args) {
  const float* tmp = args[0];
  const float* in = args[1];
  float* out = args[2];
  for (int64_t i = wg * PER_GROUP; i < (wg + 1) * PER_GROUP; ++i) out[i] = tmp[i] + in[i];
}

/* args: x f32[N], updated in place: x = x + 1. One workgroup. */
void nova_increment(int64_t wg, void* const* args) {
  (void)wg;
  float* x = args[0];
  for (int64_t i = 0; i < N; ++i) x[i] += 1.0f;
}
