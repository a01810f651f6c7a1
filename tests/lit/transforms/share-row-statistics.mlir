// RUN: nova-opt %s -nova-share-row-statistics -verify-each -split-input-file | FileCheck %s

// A forward and its backward on the same logits and labels: the forward
// writes the rows' (max, sum) into a [4, 2] init of its own, the backward
// reads them as its fourth input.
// CHECK-LABEL: func @paired
// CHECK: %[[S:.*]] = tensor.empty() : tensor<4x2xf32>
// CHECK: %[[L:.*]]:2 = nova.cross_entropy_kernel ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<4xi32>) outs(%{{.*}}, %[[S]] : tensor<4xf32>, tensor<4x2xf32>) -> tensor<4xf32>, tensor<4x2xf32>
// CHECK: %[[D:.*]] = nova.cross_entropy_kernel ins(%arg0, %arg1, %arg2, %[[L]]#1 : tensor<4x8xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4x2xf32>) outs(%{{.*}} : tensor<4x8xf32>) {backward} -> tensor<4x8xf32>
// CHECK: return %[[L]]#0, %[[D]]
func.func @paired(%x: tensor<4x8xf32>, %y: tensor<4xi32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %e0 = tensor.empty() : tensor<4xf32>
  %l = nova.cross_entropy_kernel ins(%x, %y : tensor<4x8xf32>, tensor<4xi32>) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %d = nova.cross_entropy_kernel ins(%x, %y, %g : tensor<4x8xf32>, tensor<4xi32>, tensor<4xf32>) outs(%e1 : tensor<4x8xf32>) {backward} -> tensor<4x8xf32>
  return %l, %d : tensor<4xf32>, tensor<4x8xf32>
}

// -----

// Two backwards of one forward (two cotangents): both read its one stats.
// CHECK-LABEL: func @two_backwards
// CHECK: tensor.empty() : tensor<2x3x2xf32>
// CHECK: %[[L:.*]]:2 = nova.cross_entropy_kernel
// CHECK-NOT: tensor.empty() : tensor<2x3x2xf32>
// CHECK: nova.cross_entropy_kernel ins(%arg0, %arg1, %arg2, %[[L]]#1 :
// CHECK: nova.cross_entropy_kernel ins(%arg0, %arg1, %arg3, %[[L]]#1 :
func.func @two_backwards(%x: tensor<2x3x5xf32>, %y: tensor<2x3xi64>, %g: tensor<2x3xf32>, %h: tensor<2x3xf32>)
    -> (tensor<2x3xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>) {
  %e0 = tensor.empty() : tensor<2x3xf32>
  %l = nova.cross_entropy_kernel ins(%x, %y : tensor<2x3x5xf32>, tensor<2x3xi64>) outs(%e0 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %e1 = tensor.empty() : tensor<2x3x5xf32>
  %d = nova.cross_entropy_kernel ins(%x, %y, %g : tensor<2x3x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) outs(%e1 : tensor<2x3x5xf32>) {backward} -> tensor<2x3x5xf32>
  %e2 = tensor.empty() : tensor<2x3x5xf32>
  %d2 = nova.cross_entropy_kernel ins(%x, %y, %h : tensor<2x3x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) outs(%e2 : tensor<2x3x5xf32>) {backward} -> tensor<2x3x5xf32>
  return %l, %d, %d2 : tensor<2x3xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>
}

// -----

// Left alone: a backward with no forward (the loss value unused), one
// whose forward has other labels, and one before its forward.
// CHECK-LABEL: func @unpaired
// CHECK-NOT: tensor<4x2xf32>
// CHECK-NOT: outs(%{{.*}}, %{{.*}} :
func.func @unpaired(%x: tensor<4x8xf32>, %y: tensor<4xi32>, %z: tensor<4xi32>, %g: tensor<4xf32>)
    -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xf32>) {
  %e1 = tensor.empty() : tensor<4x8xf32>
  %d = nova.cross_entropy_kernel ins(%x, %y, %g : tensor<4x8xf32>, tensor<4xi32>, tensor<4xf32>) outs(%e1 : tensor<4x8xf32>) {backward} -> tensor<4x8xf32>
  %e0 = tensor.empty() : tensor<4xf32>
  %l = nova.cross_entropy_kernel ins(%x, %z : tensor<4x8xf32>, tensor<4xi32>) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %d2 = nova.cross_entropy_kernel ins(%x, %y, %g : tensor<4x8xf32>, tensor<4xi32>, tensor<4xf32>) outs(%e2 : tensor<4x8xf32>) {backward} -> tensor<4x8xf32>
  return %d, %l, %d2 : tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xf32>
}
