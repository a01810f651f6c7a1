// A reduction with no parallel loop (a sum of squares for the gradient
// norm, a loss's sum) runs on one block: each thread folds its points
// (point = it * 256 + thread) into a partial in registers, the partials
// meet in shared memory, then a tree. Where every operand read a point is
// a whole buffer indexed by the loops in order, it is viewed as 1-D and
// indexed by the point itself (no division of the point into loop indices);
// where the threads divide the points, no branch a point.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_90a" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_90a}))' -verify-each \
// RUN:   | FileCheck %s

// 64 x 512 = 32768 points, 128 a thread: the square fused in, no branch.
// CHECK: gpu.func @nova_{{k[0-9]+}}(%[[W:.*]]: memref<64x512xf32>, %{{.*}}: memref<f32>) kernel
// CHECK: %[[FLAT:.*]] = memref.collapse_shape %[[W]] {{\[\[}}0, 1]] : memref<64x512xf32> into memref<32768xf32>
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c128 step %c1 iter_args(%{{.*}} = %cst) -> (f32) {
// CHECK-NOT: scf.if
// CHECK-NOT: arith.divui
// CHECK: memref.load %[[FLAT]][
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: scf.yield
// CHECK: memref.store {{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: gpu.return
func.func @sum_of_squares(%w: tensor<64x512xf32>) -> tensor<f32> {
  %s = nova.mul %w, %w : tensor<64x512xf32>, tensor<64x512xf32>
  %t = nova.reduce_sum %s {axes = array<i64: 0, 1>} : tensor<64x512xf32>
  return %t : tensor<f32>
}

// 300 x 7 = 2100 points over 9 rounds of 256: the last round's threads past
// the points take a branch that passes their partial on.
// CHECK: gpu.func @nova_{{k[0-9]+}}(%[[X:.*]]: memref<300x7xf32>, %{{.*}}: memref<f32>) kernel
// CHECK: %[[FLAT2:.*]] = memref.collapse_shape %[[X]] {{\[\[}}0, 1]] : memref<300x7xf32> into memref<2100xf32>
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c9 step %c1 iter_args(%[[ACC:.*]] = %cst) -> (f32) {
// CHECK: %[[P:.*]] = arith.addi
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi ult, %[[P]], %c2100 : index
// CHECK-NEXT: scf.if %[[IN]] -> (f32) {
// CHECK-NEXT: memref.load %[[FLAT2]][%[[P]]] : memref<2100xf32>
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[ACC]] : f32
func.func @odd(%x: tensor<300x7xf32>) -> tensor<f32> {
  %t = nova.reduce_sum %x {axes = array<i64: 0, 1>} : tensor<300x7xf32>
  return %t : tensor<f32>
}
