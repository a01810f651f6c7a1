// RUN: nova-opt %s -nova-fuse-matmul-prologue -verify-each -split-input-file | FileCheck %s

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#lhsT = affine_map<(m, k, n) -> (k, m)>
#lhs = affine_map<(m, k, n) -> (m, k)>
#rhs = affine_map<(m, k, n) -> (k, n)>
#out = affine_map<(m, k, n) -> (m, n)>

// The weight gradient of a GELU'd activation: the GELU (here tanh x 2) on
// the 3-d activation, read through a collapse as the transposed lhs. The
// matmul takes the activation's input, collapsed, and computes the lhs in
// its body before the multiply; the GELU's own result is gone.
// CHECK-LABEL: func @transposed
// CHECK-NOT: math.tanh
// CHECK: %[[C:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1], [2]] : tensor<2x4x6xf32> into tensor<8x6xf32>
// CHECK: linalg.generic {{.*}} ins(%[[C]], %arg1 : tensor<8x6xf32>, tensor<8x5xf32>) outs(%{{.*}} : tensor<6x5xf32>) attrs = {nova.kernel = "matmul"}
// CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %[[B:.*]]: f32, %[[O:.*]]: f32):
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[X]]
// CHECK-NEXT: %[[S:.*]] = arith.mulf %[[T]], %{{.*}}
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[S]], %[[B]]
// CHECK-NEXT: %[[A:.*]] = arith.addf %[[O]], %[[P]]
// CHECK-NEXT: linalg.yield %[[A]]
func.func @transposed(%x: tensor<2x4x6xf32>, %g: tensor<8x5xf32>) -> tensor<6x5xf32> {
  %two = arith.constant 2.0 : f32
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x4x6xf32>
  %act = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x4x6xf32>) outs(%e0 : tensor<2x4x6xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    %s = arith.mulf %t, %two : f32
    linalg.yield %s : f32
  } -> tensor<2x4x6xf32>
  %flat = tensor.collapse_shape %act [[0, 1], [2]] : tensor<2x4x6xf32> into tensor<8x6xf32>
  %e1 = tensor.empty() : tensor<6x5xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %dw = linalg.generic {indexing_maps = [#lhsT, #rhs, #out], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%flat, %g : tensor<8x6xf32>, tensor<8x5xf32>) outs(%f : tensor<6x5xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<6x5xf32>
  return %dw : tensor<6x5xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#lhsT = affine_map<(m, k, n) -> (k, m)>
#lhs = affine_map<(m, k, n) -> (m, k)>
#rhs = affine_map<(m, k, n) -> (k, n)>
#out = affine_map<(m, k, n) -> (m, n)>

// A row-major lhs is fused too (the register kernel then packs it); a
// producer whose result is also returned is not.
// CHECK-LABEL: func @row_major_and_kept
// CHECK-NOT: math.exp %{{.*}} : f32
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 : {{.*}}) {{.*}}nova.kernel = "matmul"
// CHECK: math.exp
// CHECK: %[[U:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<8x8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[U]], %arg1 : {{.*}}) {{.*}}nova.kernel = "matmul"
// CHECK: return {{.*}}, %[[U]]
func.func @row_major_and_kept(%x: tensor<8x8xf32>, %g: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8x8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e0 : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %e1 = tensor.empty() : tensor<8x8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m1 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%t, %g : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f1 : tensor<8x8xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %e2 = tensor.empty() : tensor<8x8xf32>
  %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e2 : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %e3 = tensor.empty() : tensor<8x8xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m2 = linalg.generic {indexing_maps = [#lhsT, #rhs, #out], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%u, %g : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f3 : tensor<8x8xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  return %m1, %m2, %u : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#lhs = affine_map<(m, k, n) -> (m, k)>
#rhs = affine_map<(m, k, n) -> (k, n)>
#out = affine_map<(m, k, n) -> (m, n)>

// A producer reading a bf16 activation (kept so by
// nova-bf16-saved-activations) that its body widens is fused too: the
// matmul takes the bf16 input and widens it before the producer's ops.
// CHECK-LABEL: func @bf16_input
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<8x8xbf16>, tensor<8x8xf32>) {{.*}}nova.kernel = "matmul"
// CHECK-NEXT: ^bb0(%[[X:.*]]: bf16, %[[B:.*]]: f32, %[[O:.*]]: f32):
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[W]]
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[T]], %[[B]]
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @bf16_input(%x: tensor<8x8xbf16>, %g: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8x8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xbf16>) outs(%e0 : tensor<8x8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %w = arith.extf %a : bf16 to f32
    %r = math.tanh %w : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %e1 = tensor.empty() : tensor<8x8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m1 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%t, %g : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f1 : tensor<8x8xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  return %m1 : tensor<8x8xf32>
}
