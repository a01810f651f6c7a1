// RUN: nova-opt %s -nova-reuse-dying-inputs -verify-each -split-input-file | FileCheck %s
// Then bufferized: the rewritten op reads and writes one buffer, no copy.
// RUN: nova-opt %s -nova-reuse-dying-inputs -one-shot-bufferize -split-input-file | FileCheck %s --check-prefix=BUF

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// %x dies at %y, which then writes over it; %z is returned, so it keeps its
// own destination (the caller's buffer, after destination passing).
// CHECK-LABEL: func @dies
// CHECK: %[[X:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 : {{.*}}) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<4x8xf32>) outs(%[[X]] : tensor<4x8xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT: arith.addf %[[OUT]], %[[A]]
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK: linalg.generic {{.*}} ins(%[[Y]], %arg1 : {{.*}}) outs(%[[E]] : tensor<4x8xf32>)
// BUF-LABEL: func @dies
// BUF-NOT: memref.copy
// BUF: return
func.func @dies(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %a : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %z = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %d = arith.subf %p, %q : f32
    linalg.yield %d : f32
  } -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// Not rewritten: %x is read later (by %w), or read transposed (other
// elements than the one written), or is the caller's argument.
// CHECK-LABEL: func @kept
// CHECK: %[[E0:.*]] = tensor.empty()
// CHECK: outs(%[[E0]] :
// CHECK: %[[E1:.*]] = tensor.empty()
// CHECK: outs(%[[E1]] :
// CHECK: %[[E2:.*]] = tensor.empty()
// CHECK: outs(%[[E2]] :
// CHECK: %[[E3:.*]] = tensor.empty()
// CHECK: outs(%[[E3]] :
// CHECK: return
func.func @kept(%a: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %e0 = tensor.empty() : tensor<4x4xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x4xf32>) outs(%e0 : tensor<4x4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %n = arith.negf %p : f32
    linalg.yield %n : f32
  } -> tensor<4x4xf32>
  %e1 = tensor.empty() : tensor<4x4xf32>
  %y = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x4xf32>) outs(%e1 : tensor<4x4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %n = arith.negf %p : f32
    linalg.yield %n : f32
  } -> tensor<4x4xf32>
  %e2 = tensor.empty() : tensor<4x4xf32>
  %v = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e2 : tensor<4x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %e3 = tensor.empty() : tensor<4x4xf32>
  %w = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e3 : tensor<4x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.mulf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %w, %v : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// Through a reshape: the GELU gradient, which reads the gradient of its
// output (a matmul's result, made as a matrix, read as a 3-d tensor) and the
// GELU's input. The matmul's result is its register epilogue's to read, so
// kept (nova-drop-unstored-results may then drop it): the op writes over
// the other input, which also dies there. Read directly (%n), the same.
// CHECK-LABEL: func @reshaped
// CHECK: %[[C:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<2x2x4xf32>)
// CHECK: %[[M:.*]] = linalg.matmul
// CHECK: %[[R:.*]] = tensor.expand_shape %[[M]]
// CHECK: linalg.generic {{.*}} ins(%[[R]] : tensor<2x2x4xf32>) outs(%[[C]] : tensor<2x2x4xf32>)
// CHECK: %[[N:.*]] = linalg.matmul
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[N]] : tensor<4x4xf32>) outs(%[[E]] : tensor<4x4xf32>)
func.func @reshaped(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<2x2x4xf32>)
    -> (tensor<2x2x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e5 = tensor.empty() : tensor<2x2x4xf32>
  %c2 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c : tensor<2x2x4xf32>) outs(%e5 : tensor<2x2x4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %t = math.exp %p : f32
    linalg.yield %t : f32
  } -> tensor<2x2x4xf32>
  %e0 = tensor.empty() : tensor<4x4xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f0 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = tensor.expand_shape %m [[0, 1], [2]] output_shape [2, 2, 4] : tensor<4x4xf32> into tensor<2x2x4xf32>
  %e1 = tensor.empty() : tensor<2x2x4xf32>
  %g = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r, %c2 : tensor<2x2x4xf32>, tensor<2x2x4xf32>) outs(%e1 : tensor<2x2x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.mulf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<2x2x4xf32>
  %e2 = tensor.empty() : tensor<4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f2 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e3 = tensor.empty() : tensor<4x4xf32>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%n : tensor<4x4xf32>) outs(%e3 : tensor<4x4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %t = math.tanh %p : f32
    linalg.yield %t : f32
  } -> tensor<4x4xf32>
  %e4 = tensor.empty() : tensor<2x2x4xf32>
  %k = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g : tensor<2x2x4xf32>) outs(%e4 : tensor<2x2x4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %t = math.tanh %p : f32
    linalg.yield %t : f32
  } -> tensor<2x2x4xf32>
  return %k, %h : tensor<2x2x4xf32>, tensor<4x4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// NOVA_IN_PLACE=0: nothing is rewritten.
// CHECK-LABEL: func @switched_off
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: linalg.generic {{.*}} outs(%[[E]] : tensor<4x4xf32>)
module attributes {nova.in_place = false} {
func.func @switched_off(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e0 = tensor.empty() : tensor<4x4xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x4xf32>) outs(%e0 : tensor<4x4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %n = arith.negf %p : f32
    linalg.yield %n : f32
  } -> tensor<4x4xf32>
  %e1 = tensor.empty() : tensor<4x4xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x4xf32>) outs(%e1 : tensor<4x4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %n = math.tanh %p : f32
    linalg.yield %n : f32
  } -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Backward row kernels: the cross-entropy gradient is written over its
// logits (%x, made here, read last by it), the LayerNorm input gradient
// over its output gradient (%dy); each still reads that value as its input,
// and bufferizes in place (the access is elementwise): no copy. The logits
// of @ce_kept are the caller's, and its gradient is written fresh.
// CHECK-LABEL: func @row_kernels
// CHECK: %[[X:.*]] = linalg.generic
// CHECK: nova.cross_entropy_kernel ins(%[[X]], %arg1, %arg2 : {{.*}}) outs(%[[X]] : tensor<4x8xf32>) {backward}
// CHECK: %[[DY:.*]] = linalg.generic
// CHECK: nova.layer_norm_kernel ins(%arg0, %arg3, %[[DY]] : {{.*}}) outs(%[[DY]] : tensor<4x8xf32>) {backward, eps
// BUF-LABEL: func @row_kernels
// BUF-NOT: memref.copy
// BUF: return
func.func @row_kernels(%a: tensor<4x8xf32>, %labels: tensor<4xi32>, %g: tensor<4xf32>, %gamma: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %n = arith.negf %p : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %dx = nova.cross_entropy_kernel ins(%x, %labels, %g : tensor<4x8xf32>, tensor<4xi32>, tensor<4xf32>)
      outs(%e1 : tensor<4x8xf32>) {backward} -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %dy = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dx : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %n = math.tanh %p : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  %e3 = tensor.empty() : tensor<4x8xf32>
  %din = nova.layer_norm_kernel ins(%a, %gamma, %dy : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>)
      outs(%e3 : tensor<4x8xf32>) {eps = 1.0e-5 : f64, backward} -> tensor<4x8xf32>
  %e4 = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%din : tensor<4x8xf32>) outs(%e4 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %n = arith.negf %p : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  return %r, %a : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func @ce_kept
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK: nova.cross_entropy_kernel {{.*}} outs(%[[E]] : tensor<4x8xf32>) {backward}
func.func @ce_kept(%x: tensor<4x8xf32>, %labels: tensor<4xi32>, %g: tensor<4xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %dx = nova.cross_entropy_kernel ins(%x, %labels, %g : tensor<4x8xf32>, tensor<4xi32>, tensor<4xf32>)
      outs(%e : tensor<4x8xf32>) {backward} -> tensor<4x8xf32>
  return %dx : tensor<4x8xf32>
}
