// Split-K in a step. A weight gradient over many tokens (32 x 64 from
// K = 2048) has two 32 x 32 tiles for an A100's 108 SMs: the configurator
// splits K into 16 parts. The matmul kernel takes the parts' partial
// products as its last argument (a workspace each launch allocates, parts
// x m x n f32), and the kernel k0_1_total, launched right after, folds
// them into the gradient in part order from zero (nova.gpu_output_init: the
// mma.sync kernel writes every element), a thread an element.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @weight_gradient
// CHECK: %[[WS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16x32x64xf32>
// CHECK-NEXT: nova.launch @kernels::@k0_1(%[[OUT:[^,]+]], {{.*}}, %[[WS]]) : memref<32x64xf32>, {{.*}}, memref<16x32x64xf32>
// CHECK-NEXT: nova.launch @kernels::@k0_1_total(%[[WS]], %[[OUT]]) : memref<16x32x64xf32>, memref<32x64xf32>
// CHECK: func.func @k0_1({{.*}}memref<16x32x64xf32>{{.*}}nova.gpu_split_k = 16 : i64
// CHECK-SAME: "generated as the mma.sync kernel over 32 blocks
// CHECK-SAME: split-K 16
// CHECK-SAME: #nova.lowering_config<mma_sync_matmul, workgroups = 32, tile = [32, 32], cache_tile = [32, {{[0-9]+}}, 16]
// CHECK: func.func @k0_1_total(%{{.*}}: index, %[[W:.*]]: memref<16x32x64xf32>, %[[G:.*]]: memref<32x64xf32>)
// CHECK-SAME: nova.gpu_output_init = 0.000000e+00 : f32
// CHECK-SAME: "threads: 2048 points of its parallel loops
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel"]} ins(%[[W]] : memref<16x32x64xf32>) outs(%[[G]] : memref<32x64xf32>)
// CHECK: arith.addf
// CHECK-NEXT: linalg.yield

// The kernel writes the partial products into its last argument, the
// workspace; its blocks' slowest index is their part of K.
// GPU: gpu.func @nova_k0_1(%{{.*}}: memref<32x64xf32>, %{{.*}}: memref<2048x32xf32>, %{{.*}}: memref<2048x64xf32>, %[[WSG:.*]]: memref<16x32x64xf32>) kernel
// GPU: memref.reinterpret_cast %[[WSG]] to offset: [0], sizes: [16, 32, 64], strides: [2048, 64, 1]
// GPU: gpu.block_id x
// GPU: arith.minsi
// GPU: arith.maxsi
// GPU: nvgpu.mma.sync{{.*}}tf32Enabled
// GPU: gpu.func @nova_k0_1_total(
module attributes {nova.matmul_precision = "bf16"} {
  func.func @weight_gradient(%x: tensor<2048x32xf32>, %d: tensor<2048x64xf32>) -> tensor<32x64xf32> {
    %0 = nova.matmul %x, %d {transpose_a = true} : tensor<2048x32xf32>, tensor<2048x64xf32>
    return %0 : tensor<32x64xf32>
  }
}
