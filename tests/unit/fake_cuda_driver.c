/* fake_cuda_driver.c - a stand-in for libcuda.so.1 (loaded through
 * NOVA_CUDA_DRIVER), so the runtime's driver paths run without a GPU.
 * Default: one H200 (its cuDeviceGetAttribute values as the driver reports
 * them). Built with -DFAKE_NO_DEVICE: cuInit fails as on a machine whose
 * driver sees no GPU. */
#include <stddef.h>
#include <string.h>

int cuInit(unsigned flags) {
  (void)flags;
#ifdef FAKE_NO_DEVICE
  return 100; /* CUDA_ERROR_NO_DEVICE */
#else
  return 0;
#endif
}
int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
int cuDeviceGetCount(int* n) {
#ifdef FAKE_NO_DEVICE
  *n = 0;
#else
  *n = 1;
#endif
  return 0;
}
int cuDeviceGet(int* d, int ordinal) {
  if (ordinal != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *d = 0;
  return 0;
}
int cuDeviceGetName(char* name, int length, int d) {
  (void)d;
  strncpy(name, "NVIDIA H200", (size_t)length);
  return 0;
}
int cuDeviceGetAttribute(int* v, int attribute, int d) {
  (void)d;
  switch (attribute) {
    case 1: *v = 1024; return 0;       /* max threads per block */
    case 8: *v = 49152; return 0;      /* shared memory per block */
    case 10: *v = 32; return 0;        /* warp size */
    case 12: *v = 65536; return 0;     /* registers per block */
    case 13: *v = 1980000; return 0;   /* clock, kHz */
    case 16: *v = 132; return 0;       /* multiprocessors */
    case 36: *v = 3201000; return 0;   /* memory clock, kHz */
    case 37: *v = 6144; return 0;      /* bus width, bits */
    case 38: *v = 62914560; return 0;  /* L2 bytes */
    case 39: *v = 2048; return 0;      /* threads per SM */
    case 75: *v = 9; return 0;
    case 76: *v = 0; return 0;
    case 81: *v = 233472; return 0;    /* shared memory per SM */
    case 82: *v = 65536; return 0;     /* registers per SM */
    case 97: *v = 232448; return 0;    /* shared memory per block, opt-in */
    case 106: *v = 32; return 0;       /* blocks per SM */
    default: return 1;                 /* CUDA_ERROR_INVALID_VALUE */
  }
}
int cuDeviceTotalMem_v2(size_t* bytes, int d) {
  (void)d;
  *bytes = (size_t)150754820096ull;
  return 0;
}
int cuGetErrorName(int e, const char** s) {
  *s = e == 100 ? "CUDA_ERROR_NO_DEVICE" : e == 101 ? "CUDA_ERROR_INVALID_DEVICE" : "CUDA_ERROR_INVALID_VALUE";
  return 0;
}
int cuGetErrorString(int e, const char** s) {
  *s = e == 100 ? "no CUDA-capable device is detected" : e == 101 ? "invalid device ordinal" : "invalid argument";
  return 0;
}
