// RUN: nova-opt %s -split-input-file -nova-autodiff -verify-each | FileCheck %s
// RUN: nova-opt %s -split-input-file -nova-autodiff -canonicalize -cse | FileCheck %s --check-prefix=CLEAN

// Forward and backward in one function: d/dw sum(tanh(x w)).
// CHECK-LABEL: func @mlp_loss
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x3xf32>)
// CHECK: %[[H:.*]] = nova.matmul %[[X]], %[[W]]
// CHECK: %[[T:.*]] = nova.tanh %[[H]]
// CHECK: %[[L:.*]] = nova.reduce_sum %[[T]]
// CHECK-NOT: nova.gradient
// CHECK: %[[ONE:.*]] = nova.constant 1.000000e+00 : tensor<f32>
// CHECK: nova.reshape %[[ONE]] : tensor<f32> -> tensor<1x1xf32>
// CHECK: nova.broadcast {{.*}} -> tensor<4x3xf32>
// CHECK: nova.mul %[[T]], %[[T]]
// CHECK: %[[DH:.*]] = nova.mul
// CHECK: %[[DW:.*]] = nova.matmul %[[X]], %[[DH]] {transpose_a = true}
// CHECK: return %[[L]], %[[DW]]
func.func @mlp_loss(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>) -> (tensor<f32>, tensor<8x3xf32>) {
  %h = nova.matmul %x, %w : tensor<4x8xf32>, tensor<8x3xf32>
  %t = nova.tanh %h : tensor<4x3xf32>
  %l = nova.reduce_sum %t {axes = array<i64: 0, 1>} : tensor<4x3xf32>
  %g = nova.gradient %l wrt %w : tensor<f32>, tensor<8x3xf32>
  return %l, %g : tensor<f32>, tensor<8x3xf32>
}

// -----

// A value used twice accumulates both cotangents; a broadcast operand's
// cotangent is summed back to its shape.
// CHECK-LABEL: func @reuse_and_broadcast
// CHECK: %[[B:.*]] = nova.broadcast %{{.*}} : tensor<3xf32> -> tensor<2x3xf32>
// CHECK: nova.add
// CHECK: nova.reduce_sum %{{.*}} {axes = array<i64: 0>} : tensor<2x3xf32>
// CHECK: return
func.func @reuse_and_broadcast(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %bb = nova.broadcast %b : tensor<3xf32> -> tensor<2x3xf32>
  %y = nova.mul %bb, %bb : tensor<2x3xf32>, tensor<2x3xf32>
  %z = nova.add %y, %x : tensor<2x3xf32>, tensor<2x3xf32>
  %l = nova.reduce_sum %z {axes = array<i64: 0, 1>} : tensor<2x3xf32>
  %g = nova.gradient %l wrt %b : tensor<f32>, tensor<3xf32>
  return %g : tensor<3xf32>
}

// -----

// Integer labels are not differentiated; the VJP of the x-only branch is not
// built (no exp of the labels' one-hot), and after clean-up no forward op the
// gradient does not need survives.
// CHECK-LABEL: func @labels_skipped
// CHECK: nova.one_hot
// CHECK-NOT: nova.gradient
// CLEAN-LABEL: func @labels_skipped
// CLEAN-NOT: nova.exp
// CLEAN: return
func.func @labels_skipped(%x: tensor<2x4xf32>, %y: tensor<2xi32>) -> tensor<2x4xf32> {
  %oh = nova.one_hot %y : tensor<2xi32> -> tensor<2x4xf32>
  %unused = nova.exp %oh : tensor<2x4xf32>
  %ls = nova.log_softmax %x {axis = 1 : i64} : tensor<2x4xf32>
  %p = nova.mul %ls, %oh : tensor<2x4xf32>, tensor<2x4xf32>
  %s = nova.reduce_mean %p {axes = array<i64: 0, 1>} : tensor<2x4xf32>
  %l = nova.neg %s : tensor<f32>
  %g = nova.gradient %l wrt %x : tensor<f32>, tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

// The fused cross-entropy: its VJP is one cross_entropy_grad of the logits,
// the labels and the rows' cotangent (the mean's, spread over the rows);
// after clean-up nothing of the forward but the logits and labels is read.
// CHECK-LABEL: func @cross_entropy
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>, %[[Y:.*]]: tensor<2xi32>)
// CHECK: nova.cross_entropy %[[X]], %[[Y]]
// CHECK-NOT: nova.gradient
// CHECK: %[[G:.*]] = nova.broadcast {{.*}} -> tensor<2xf32>
// CHECK: nova.cross_entropy_grad %[[X]], %[[Y]], %{{.*}} : tensor<2x4xf32>, tensor<2xi32>, tensor<2xf32>
// CLEAN-LABEL: func @cross_entropy
// CLEAN-NOT: nova.cross_entropy %
// CLEAN: nova.cross_entropy_grad
func.func @cross_entropy(%x: tensor<2x4xf32>, %y: tensor<2xi32>) -> tensor<2x4xf32> {
  %rows = nova.cross_entropy %x, %y : tensor<2x4xf32>, tensor<2xi32>
  %l = nova.reduce_mean %rows {axes = array<i64: 0>} : tensor<2xf32>
  %g = nova.gradient %l wrt %x : tensor<f32>, tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

// A wrt value the loss does not depend on gets zeros.
// CHECK-LABEL: func @unused_wrt
// CHECK: %[[Z:.*]] = nova.constant 0.000000e+00 : tensor<5xf32>
// CHECK: return %[[Z]]
func.func @unused_wrt(%x: tensor<3xf32>, %u: tensor<5xf32>) -> tensor<5xf32> {
  %l = nova.reduce_sum %x {axes = array<i64: 0>} : tensor<3xf32>
  %g = nova.gradient %l wrt %u : tensor<f32>, tensor<5xf32>
  return %g : tensor<5xf32>
}

// -----

// Regression: distinct constants must survive canonicalization (constants
// were once merged by type because nova.constant claimed ConstantLike).
// CLEAN-LABEL: func @sqrt_rank0
// CLEAN-DAG: nova.constant 1.000000e+00 : tensor<f64>
// CLEAN-DAG: nova.constant 5.000000e-01 : tensor<f64>
func.func @sqrt_rank0(%w: tensor<f64>, %x: tensor<f64>) -> tensor<f64> {
  %0 = nova.sqrt %x : tensor<f64>
  %1 = nova.mul %0, %w : tensor<f64>, tensor<f64>
  %2 = nova.reduce_sum %1 {axes = array<i64>} : tensor<f64>
  %g = nova.gradient %2 wrt %x : tensor<f64>, tensor<f64>
  return %g : tensor<f64>
}
