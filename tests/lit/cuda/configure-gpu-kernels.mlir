// nova-configure-gpu-kernels (CudaTarget's configure pass) on the kernels of
// a small MLP: the matmul kernel gets the GPU configurator's decision and
// its explanation; float32 stays on the CUDA cores unless the step asked
// for bf16 (nova.matmul_precision), as PyTorch's default does.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-configure-gpu-kernels="target=sm_80" -verify-each | FileCheck %s
// RUN: env NOVA_TARGET=sm_86 nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s --check-prefix=ENV

// CHECK: module @kernels
// CHECK: func.func @k0({{.*}}nova.gpu_why = ["inputs: 4 x 3 x 8 (batch 1), f32 operands, NN, on sm_80
// CHECK-SAME: "instruction: fma.f32 (no tensor-core instruction takes these operands)"
// CHECK-SAME: nova.lowering_config = #nova.lowering_config<simt_matmul, workgroups = 1, tile = [{{[0-9]+}}, {{[0-9]+}}], cache_tile = [16, 2, 1], register_tile = [{{[0-9]+}}, {{[0-9]+}}]>
// When NOVA_TARGET names a GPU, nova-opt's pipeline runs the CUDA target's
// configure passes: the matmul, with its epilogue (the bias add and GELU,
// run on its results: nova-gpu-threads keeps them one kernel), is generated
// as the simt kernel in the configurator's shape for sm_86 (K slabs
// double-buffered in shared memory: stages 2).
// ENV: func.func @k0({{.*}}nova.gpu_epilogue = array<i64: 3, 2>{{.*}}generated as the simt kernel over 1 blocks{{.*}}the elementwise op after it fused{{.*}}on sm_86{{.*}}#nova.lowering_config<simt_matmul, workgroups = 1, tile = [{{[0-9]+}}, {{[0-9]+}}], cache_tile = [16, 2, 1]
func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %b: tensor<3xf32>) -> tensor<4x3xf32> {
  %0 = nova.matmul %x, %w : tensor<4x8xf32>, tensor<8x3xf32>
  %1 = nova.broadcast %b : tensor<3xf32> -> tensor<4x3xf32>
  %2 = nova.add %0, %1 : tensor<4x3xf32>, tensor<4x3xf32>
  %3 = nova.gelu %2 : tensor<4x3xf32>
  return %3 : tensor<4x3xf32>
}
