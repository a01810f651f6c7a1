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

// -----

// LayerNorm: the forward writes each row's (mean, rstd); the VJP's
// normalized input (a forward of the same input and eps, gamma 1 and beta
// 0) becomes (x - mean) rstd over the input and the stats, and the
// backward reads them. A forward of another eps is rows of its own.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[MEAN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
// CHECK-DAG: #[[RSTD:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, 1)>
// CHECK-LABEL: func @layer_norm
// CHECK: %[[S:.*]] = tensor.empty() : tensor<2x3x2xf32>
// CHECK: %[[Y:.*]]:2 = nova.layer_norm_kernel ins(%arg0, %arg1, %arg2 : {{.*}}) outs(%{{.*}}, %[[S]] : tensor<2x3x8xf32>, tensor<2x3x2xf32>) {eps = 1.000000e-05 : f64}
// CHECK: %[[XHAT:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[MEAN]], #[[RSTD]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %[[Y]]#1, %[[Y]]#1 : tensor<2x3x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %[[M:.*]]: f32, %[[R:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[C:.*]] = arith.subf %[[X]], %[[M]] : f32
// CHECK-NEXT: %[[N:.*]] = arith.mulf %[[C]], %[[R]] : f32
// CHECK-NEXT: linalg.yield %[[N]]
// CHECK: nova.layer_norm_kernel ins(%arg0, %arg1, %arg3, %[[Y]]#1 : {{.*}}) outs(%{{.*}} : tensor<2x3x8xf32>) {backward, eps = 1.000000e-05 : f64}
// CHECK: nova.layer_norm_kernel ins(%arg0, %arg1, %arg2 : {{.*}}) outs(%{{.*}} : tensor<2x3x8xf32>) {eps = 1.000000e-03 : f64}
// CHECK: return %[[Y]]#0, %[[XHAT]]
func.func @layer_norm(%x: tensor<2x3x8xf32>, %gamma: tensor<8xf32>, %beta: tensor<8xf32>, %g: tensor<2x3x8xf32>)
    -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %one = arith.constant dense<1.0> : tensor<8xf32>
  %zero = arith.constant dense<0.0> : tensor<8xf32>
  %e0 = tensor.empty() : tensor<2x3x8xf32>
  %y = nova.layer_norm_kernel ins(%x, %gamma, %beta : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e0 : tensor<2x3x8xf32>) {eps = 1.0e-5 : f64} -> tensor<2x3x8xf32>
  %e1 = tensor.empty() : tensor<2x3x8xf32>
  %xhat = nova.layer_norm_kernel ins(%x, %one, %zero : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<2x3x8xf32>) {eps = 1.0e-5 : f64} -> tensor<2x3x8xf32>
  %e2 = tensor.empty() : tensor<2x3x8xf32>
  %dx = nova.layer_norm_kernel ins(%x, %gamma, %g : tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) outs(%e2 : tensor<2x3x8xf32>) {backward, eps = 1.0e-5 : f64} -> tensor<2x3x8xf32>
  %e3 = tensor.empty() : tensor<2x3x8xf32>
  %other = nova.layer_norm_kernel ins(%x, %gamma, %beta : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e3 : tensor<2x3x8xf32>) {eps = 1.0e-3 : f64} -> tensor<2x3x8xf32>
  return %y, %xhat, %dx, %other : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// -----

// A later forward of the same rows with another gamma (a recomputed
// forward, nova-rematerialize's) reads the stats and stays a kernel.
// CHECK-LABEL: func @recomputed
// CHECK: %[[Y:.*]]:2 = nova.layer_norm_kernel
// CHECK: nova.layer_norm_kernel ins(%arg0, %arg1, %arg2, %[[Y]]#1 : {{.*}}) outs(%{{.*}} : tensor<6x8xf32>) {eps = 1.000000e-05 : f64}
// CHECK: nova.layer_norm_kernel ins(%arg0, %arg1, %arg3, %[[Y]]#1 : {{.*}}) outs(%{{.*}} : tensor<6x8xf32>) {backward, eps = 1.000000e-05 : f64}
// CHECK-NOT: linalg.generic
func.func @recomputed(%x: tensor<6x8xf32>, %gamma: tensor<8xf32>, %beta: tensor<8xf32>, %g: tensor<6x8xf32>)
    -> (tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>) {
  %e0 = tensor.empty() : tensor<6x8xf32>
  %y = nova.layer_norm_kernel ins(%x, %gamma, %beta : tensor<6x8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e0 : tensor<6x8xf32>) {eps = 1.0e-5 : f64} -> tensor<6x8xf32>
  %e1 = tensor.empty() : tensor<6x8xf32>
  %y2 = nova.layer_norm_kernel ins(%x, %gamma, %beta : tensor<6x8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<6x8xf32>) {eps = 1.0e-5 : f64} -> tensor<6x8xf32>
  %e2 = tensor.empty() : tensor<6x8xf32>
  %dx = nova.layer_norm_kernel ins(%x, %gamma, %g : tensor<6x8xf32>, tensor<8xf32>, tensor<6x8xf32>) outs(%e2 : tensor<6x8xf32>) {backward, eps = 1.0e-5 : f64} -> tensor<6x8xf32>
  return %y, %y2, %dx : tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>
}
