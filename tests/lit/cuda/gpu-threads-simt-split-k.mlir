// Split-K for the simt kernel (f32 matmuls at full precision; on an RTX
// 3060, whose tf32 rate is its f32 rate, the configurator keeps f32 FMAs
// over 3xtf32). A weight gradient over many tokens (256 x 256 from
// K = 2048) has 16 tiles of 64 x 64 for its 28 SMs: the configurator
// splits K into 8 parts.
// The workspace (parts x m x n, a new allocation at each launch) takes the
// gradient's place among the kernel's arguments; the kernel k0_1_total,
// launched after it, folds the parts into the gradient in part order,
// starting from the zero of the fill it replaced (nova.gpu_output_init).
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_86" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_86" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_86}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @weight_gradient
// CHECK-NOT: linalg.fill
// CHECK: %[[WS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x256x256xf32>
// CHECK-NEXT: nova.launch @kernels::@k0_1(%{{.*}}, %{{.*}}, %[[WS]]) : memref<2048x256xf32>, memref<2048x256xf32>, memref<8x256x256xf32>
// CHECK-NEXT: nova.launch @kernels::@k0_1_total(%[[WS]], %{{.*}}) : memref<8x256x256xf32>, memref<256x256xf32>
// CHECK: func.func @k0_1({{.*}}: memref<8x256x256xf32>) attributes {{.*}}nova.gpu_split_k = 8 : i64
// CHECK-SAME: "generated as the simt kernel over 128 blocks of 64 threads (64x64 tiles, K slabs of 16 double-buffered in shared memory, 8x8 results a thread, K split into 8 parts
// CHECK-SAME: #nova.lowering_config<simt_matmul, workgroups = 128, tile = [64, 64], cache_tile = [16, 2, 8]
// CHECK-SAME: nova.summary = "matmul: matmul 256x256x2048 f32 (lhs transposed), K in 8 parts"
// CHECK: func.func @k0_1_total(%{{.*}}: index, %{{.*}}: memref<8x256x256xf32>, %{{.*}}: memref<256x256xf32>)
// CHECK-SAME: nova.gpu_output_init = 0.000000e+00 : f32

// Each block's part is the slowest index of its grid; its accumulators
// start from zero and its results go to its part of the workspace.
// GPU: gpu.func @nova_k0_1(%{{.*}}: memref<2048x256xf32>, %{{.*}}: memref<2048x256xf32>, %[[W:.*]]: memref<8x256x256xf32>) kernel
// GPU: %[[BLOCK:.*]] = gpu.block_id x
// GPU: %[[TILE:.*]] = arith.divui %[[BLOCK]], %c4
// GPU: %[[PART:.*]] = arith.divui %[[TILE]], %c4
// GPU: arith.muli %[[PART]], %c256
// GPU: vector.store %{{.*}}, %[[W]][%[[PART]], %{{.*}}, %{{.*}}] : memref<8x256x256xf32>, vector<4xf32>
// GPU: gpu.func @nova_k0_1_total(
func.func @weight_gradient(%x: tensor<2048x256xf32>, %dy: tensor<2048x256xf32>) -> tensor<256x256xf32> {
  %0 = nova.matmul %x, %dy {transpose_a = true} : tensor<2048x256xf32>, tensor<2048x256xf32>
  return %0 : tensor<256x256xf32>
}
