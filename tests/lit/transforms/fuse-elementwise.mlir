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
