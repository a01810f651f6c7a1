// RUN: nova-opt %s -nova-lower-to-linalg -nova-fuse-elementwise -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-linalg -canonicalize -nova-fuse-elementwise -verify-each | FileCheck %s --check-prefix=RESHAPE

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

// A linear layer over [B, T, d] and its residual add: the bias add of the
// product's rows [B*T, n] is rewritten over [B, T, n] (the reshape moved to
// the product), so that it and the residual add are one op, the product's
// one reader. The matmul's own operands keep their reshape. (After the
// canonicalization that the pipeline runs first, which folds nova.reshape's
// collapse-then-expand into one reshape.)
// RESHAPE-LABEL: func @across_reshape
// RESHAPE: %[[X:.*]] = tensor.collapse_shape %arg0
// RESHAPE: %[[P:.*]] = linalg.generic {{.*}} ins(%[[X]], %{{.*}} : tensor<8x4xf32>, tensor<4x6xf32>) {{.*}}nova.kernel = "matmul"
// RESHAPE: %[[E:.*]] = tensor.expand_shape %[[P]] {{\[\[}}0, 1], [2]] {{.*}} into tensor<2x4x6xf32>
// RESHAPE: %[[R:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]{{.*}} ins(%[[E]], %arg2, %arg3 : tensor<2x4x6xf32>, tensor<6xf32>, tensor<2x4x6xf32>)
// RESHAPE: arith.addf
// RESHAPE: arith.addf
// RESHAPE-NOT: linalg.generic
// RESHAPE: return %[[R]]
func.func @across_reshape(%x: tensor<2x4x4xf32>, %w: tensor<4x6xf32>, %b: tensor<6xf32>, %r: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
  %x2 = nova.reshape %x : tensor<2x4x4xf32> -> tensor<8x4xf32>
  %0 = nova.matmul %x2, %w : tensor<8x4xf32>, tensor<4x6xf32>
  %1 = nova.broadcast %b : tensor<6xf32> -> tensor<8x6xf32>
  %2 = nova.add %0, %1 : tensor<8x6xf32>, tensor<8x6xf32>
  %3 = nova.reshape %2 : tensor<8x6xf32> -> tensor<2x4x6xf32>
  %4 = nova.add %3, %r : tensor<2x4x6xf32>, tensor<2x4x6xf32>
  return %4 : tensor<2x4x6xf32>
}

// A one-hot read by two ops (the loss and its gradient) is not stored: each
// gets a copy of the comparison with the label, fused into it.
// CHECK-LABEL: func @one_hot_twice
// CHECK-NOT: linalg.generic {{.*}} ins(%arg1 : tensor<4xi32>)
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<4xi32>)
// CHECK: linalg.index 1
// CHECK: arith.cmpi eq
// CHECK: %[[GRAD:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<4xi32>)
// CHECK: linalg.index 1
// CHECK: arith.cmpi eq
// CHECK: math.exp
// CHECK: return %[[LOSS]], %[[GRAD]]
func.func @one_hot_twice(%logits: tensor<4x8xf32>, %labels: tensor<4xi32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %t = nova.one_hot %labels : tensor<4xi32> -> tensor<4x8xf32>
  %p = nova.mul %logits, %t : tensor<4x8xf32>, tensor<4x8xf32>
  %s = nova.reduce_sum %p {axes = array<i64: 1>} : tensor<4x8xf32>
  %g = nova.sub %logits, %t : tensor<4x8xf32>, tensor<4x8xf32>
  %e = nova.exp %g : tensor<4x8xf32>
  return %s, %e : tensor<4xf32>, tensor<4x8xf32>
}
