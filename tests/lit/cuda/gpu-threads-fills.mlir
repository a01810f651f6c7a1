// A fill launched right before the kernel that reduces into the buffer it
// filled is gone: the reduction starts its output from the fill's constant
// (nova.gpu_output_init). Each of the three forms: a column sum (a thread a
// column adds its column in a register from 0, then stores it), a row sum (a
// warp a row: lane 0 stores the total, no load of the output), a sum to a
// scalar (one block: thread 0 stores the tree's total).
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @sums
// CHECK-NEXT: nova.launch @kernels::@[[COLS:k[0-9]+]](%arg0, %arg1) : memref<64x256xf32>, memref<256xf32>
// CHECK-NEXT: nova.launch @kernels::@[[ROWS:k[0-9]+]](%arg0, %arg2) : memref<64x256xf32>, memref<64xf32>
// CHECK-NEXT: nova.launch @kernels::@[[ALL:k[0-9]+]](%arg0, %arg3) : memref<64x256xf32>, memref<f32>
// CHECK-NEXT: return
// CHECK-NOT: linalg.fill
// CHECK: func.func @[[COLS]]({{.*}}nova.gpu_output_init = 0.000000e+00 : f32{{.*}}"threads: 256 points of its parallel loops
// CHECK: func.func @[[ROWS]]({{.*}}nova.gpu_output_init = 0.000000e+00 : f32{{.*}}"threads: 64 points of its parallel loops, a warp each
// CHECK: func.func @[[ALL]]({{.*}}nova.gpu_output_init = 0.000000e+00 : f32{{.*}}"threads: a reduction of 16384 points

// GPU: gpu.func @nova_[[COLS:k[0-9]+]](%[[X:.*]]: memref<64x256xf32>, %[[OUT:.*]]: memref<256xf32>)
// GPU: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// GPU: scf.for %{{.*}} iter_args(%{{.*}} = %[[ZERO]]) -> (f32)
// GPU-NEXT: memref.load %[[X]]
// GPU-NOT: memref.load %[[OUT]]
// GPU: memref.store %{{.*}}, %[[OUT]][
// GPU: gpu.func @nova_k{{[0-9]+}}(%{{.*}}: memref<64x256xf32>, %[[ROWSUM:.*]]: memref<64xf32>)
// GPU-NOT: memref.load %[[ROWSUM]]
// GPU: gpu.shuffle xor
// GPU-NOT: memref.load %[[ROWSUM]]
// GPU: memref.store %{{.*}}, %[[ROWSUM]][
// GPU: gpu.func @nova_k{{[0-9]+}}(%{{.*}}: memref<64x256xf32>, %[[TOTAL:.*]]: memref<f32>)
// GPU-NOT: memref.load %[[TOTAL]]
// GPU: memref.store %{{.*}}, %[[TOTAL]][] : memref<f32>
// GPU: gpu.return
func.func @sums(%x: tensor<64x256xf32>) -> (tensor<256xf32>, tensor<64xf32>, tensor<f32>) {
  %0 = nova.reduce_sum %x {axes = array<i64: 0>} : tensor<64x256xf32>
  %1 = nova.reduce_sum %x {axes = array<i64: 1>} : tensor<64x256xf32>
  %2 = nova.reduce_sum %x {axes = array<i64: 0, 1>} : tensor<64x256xf32>
  return %0, %1, %2 : tensor<256xf32>, tensor<64xf32>, tensor<f32>
}
