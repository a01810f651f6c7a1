// RUN: nova-opt %s -nova-lower-to-linalg -nova-fuse-elementwise -verify-each | FileCheck %s

// exp feeds add: one generic. gelu feeds a matmul: not fused (the matmul
// would recompute gelu once per output column).
// CHECK-LABEL: func @chain_and_matmul
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: math.tanh
// CHECK: linalg.yield
// CHECK: linalg.fill
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction", "parallel"]
// CHECK-NOT: math.tanh
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: linalg.yield
func.func @chain_and_matmul(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %0 = nova.exp %x : tensor<4x8xf32>
  %1 = nova.add %0, %x : tensor<4x8xf32>, tensor<4x8xf32>
  %2 = nova.gelu %1 : tensor<4x8xf32>
  %3 = nova.matmul %2, %w : tensor<4x8xf32>, tensor<8x3xf32>
  return %3 : tensor<4x3xf32>
}

// AdamW's shape: m' = b m + g is returned and read by the update p - m'.
// One generic computes both (two results), m' is not computed twice.
// CHECK-LABEL: func @returned_producer
// CHECK: %[[F:.*]]:2 = linalg.generic
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: arith.subf
// CHECK: linalg.yield
// CHECK-NOT: linalg.generic
// CHECK: return %[[F]]#1, %[[F]]#0
func.func @returned_producer(%m: tensor<4x8xf32>, %g: tensor<4x8xf32>, %p: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %b = nova.mul %m, %m : tensor<4x8xf32>, tensor<4x8xf32>
  %m2 = nova.add %b, %g : tensor<4x8xf32>, tensor<4x8xf32>
  %p2 = nova.sub %p, %m2 : tensor<4x8xf32>, tensor<4x8xf32>
  return %p2, %m2 : tensor<4x8xf32>, tensor<4x8xf32>
}
