// A step lowered for the CPU keeps a matmul's product in a buffer of its
// kernel's own (memref.alloc {nova.unstored} in the kernel); nova-gpu-threads
// cannot split that kernel into one GPU kernel per op, and says so (it
// crashed before: the split erased the buffer under its other users).
// RUN: env -u NOVA_TARGET not nova-opt %s -nova-lower-to-kernels -nova-gpu-threads=target=sm_80 2>&1 | FileCheck %s
// CHECK: error: nova-gpu-threads: kernel k0 passes a value between its ops through a buffer of its own ('memref<64x48xf32>'), which no split into one GPU kernel per op can share: lower the step for the GPU target from the first stage (NOVA_TARGET=sm_...)
func.func @linear(%x: tensor<64x32xf32>, %w: tensor<32x48xf32>, %b: tensor<48xf32>) -> tensor<64x48xf32> {
  %0 = nova.matmul %x, %w : tensor<64x32xf32>, tensor<32x48xf32>
  %1 = nova.broadcast %b : tensor<48xf32> -> tensor<64x48xf32>
  %2 = nova.add %0, %1 : tensor<64x48xf32>, tensor<64x48xf32>
  return %2 : tensor<64x48xf32>
}
