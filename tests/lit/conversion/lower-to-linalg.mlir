// RUN: nova-opt %s -split-input-file -nova-lower-to-linalg -verify-each | FileCheck %s

// CHECK-LABEL: func @add
// CHECK-NOT: nova.
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x3xf32>
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4x3xf32>) outs(%[[E]] : tensor<4x3xf32>)
// CHECK: arith.addf
func.func @add(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %0 = nova.add %a, %b : tensor<4x3xf32>, tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// CHECK-DAG: #[[LHS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[RHS:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func @matmul
// CHECK: %[[Z:.*]] = linalg.fill
// CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #[[OUT]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK-SAME: outs(%[[Z]] : tensor<4x3xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %0 = nova.matmul %a, %b : tensor<4x8xf32>, tensor<8x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// A transposed lhs changes its indexing map; a transposed rhs is first
// materialised as [.., k, n] so the inner loop reads contiguous rows.
// CHECK-DAG: #[[LHS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1)>
// CHECK-DAG: #[[RHS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-LABEL: func @batched_transposed
// CHECK: %[[BT:.*]] = linalg.transpose ins(%{{.*}} : tensor<2x3x8xf32>) outs(%{{.*}} : tensor<2x8x3xf32>) permutation = [0, 2, 1]
// CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], {{.*}}], iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
// CHECK-SAME: ins(%{{.*}}, %[[BT]] :
// CHECK-SAME: nova.kernel = "matmul"
func.func @batched_transposed(%a: tensor<2x8x4xf32>, %b: tensor<2x3x8xf32>) -> tensor<2x4x3xf32> {
  %0 = nova.matmul %a, %b {transpose_a = true, transpose_b = true} : tensor<2x8x4xf32>, tensor<2x3x8xf32>
  return %0 : tensor<2x4x3xf32>
}

// -----

// Stretched dims are read at index 0; missing leading dims are dropped.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (0, d2)>
// CHECK-LABEL: func @broadcast
// CHECK: linalg.generic {indexing_maps = [#[[IN]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel"]}
func.func @broadcast(%a: tensor<1x5xf32>) -> tensor<2x4x5xf32> {
  %0 = nova.broadcast %a : tensor<1x5xf32> -> tensor<2x4x5xf32>
  return %0 : tensor<2x4x5xf32>
}

// -----

// CHECK-LABEL: func @reduce_max_keep
// CHECK: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.fill ins(%[[NEG]] : f32)
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
func.func @reduce_max_keep(%a: tensor<3x4xf32>) -> tensor<3x1xf32> {
  %0 = nova.reduce_max %a {axes = array<i64: 1>, keep_dims = true} : tensor<3x4xf32>
  return %0 : tensor<3x1xf32>
}

// -----

// Mean is a sum followed by a scale of 1/count.
// CHECK-LABEL: func @mean
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK: %[[S:.*]] = arith.constant 0.083333{{.*}} : f32
// CHECK: linalg.generic
// CHECK: arith.mulf %{{.*}}, %[[S]]
func.func @mean(%a: tensor<3x4xf32>) -> tensor<f32> {
  %0 = nova.reduce_mean %a {axes = array<i64: 0, 1>} : tensor<3x4xf32>
  return %0 : tensor<f32>
}

// -----

// Softmax is rewritten into max, subtract, exp, sum, divide.
// CHECK-LABEL: func @softmax
// CHECK: arith.maximumf
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.divf
func.func @softmax(%a: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = nova.softmax %a {axis = 1 : i64} : tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// CHECK-LABEL: func @reshape
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2]] : tensor<2x3x4xf32> into tensor<24xf32>
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [6, 4] : tensor<24xf32> into tensor<6x4xf32>
func.func @reshape(%a: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %0 = nova.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

// CHECK-LABEL: func @transpose_and_constant
// CHECK: linalg.transpose ins(%{{.*}} : tensor<2x3xf32>) outs(%{{.*}} : tensor<3x2xf32>) permutation = [1, 0]
// CHECK: %[[C:.*]] = arith.constant 2.500000e+00 : f32
// CHECK: linalg.fill ins(%[[C]] : f32)
func.func @transpose_and_constant(%a: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %0 = nova.transpose %a {permutation = array<i64: 1, 0>} : tensor<2x3xf32>
  %1 = nova.constant 2.5 : tensor<3x2xf32>
  return %0, %1 : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// GELU (tanh form) is a scalar formula inside one generic.
// CHECK-LABEL: func @gelu
// CHECK: linalg.generic
// CHECK: math.tanh
// CHECK-NOT: math.erf
func.func @gelu(%a: tensor<8xf32>) -> tensor<8xf32> {
  %0 = nova.gelu %a : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Gather reads the table inside the generic with a clamped index and a
// range check; scatter-add is a loop nest carrying the result tensor and
// skipping out-of-range indices.
// CHECK-LABEL: func @gather_scatter
// CHECK: linalg.generic
// CHECK: arith.cmpi sge
// CHECK: arith.cmpi slt
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<7x4xf32>
// CHECK: arith.select
// CHECK: scf.for
// CHECK: scf.if
// CHECK: scf.for
// CHECK: tensor.insert
func.func @gather_scatter(%t: tensor<7x4xf32>, %i: tensor<3xi32>, %u: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<7x4xf32>) {
  %0 = nova.gather %t[%i] : tensor<7x4xf32>, tensor<3xi32>
  %1 = nova.scatter_add %i, %u : tensor<3xi32>, tensor<3x4xf32> -> tensor<7x4xf32>
  return %0, %1 : tensor<3x4xf32>, tensor<7x4xf32>
}

// -----

// CHECK-LABEL: func @mask_slice_pad
// CHECK: linalg.index 0
// CHECK: linalg.index 1
// CHECK: arith.cmpi ugt
// CHECK: 0xFF800000
// CHECK: tensor.extract_slice %{{.*}}[0, 1] [3, 2] [1, 1]
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, 1] [3, 2] [1, 1]
func.func @mask_slice_pad(%x: tensor<3x4xf32>) -> (tensor<3x3xf32>, tensor<3x4xf32>) {
  %0 = nova.causal_mask : tensor<3x3xf32>
  %1 = nova.slice %x {offsets = array<i64: 0, 1>, sizes = array<i64: 3, 2>} : tensor<3x4xf32>
  %2 = nova.pad %1 {low = array<i64: 0, 1>, high = array<i64: 0, 1>} : tensor<3x2xf32>
  return %0, %2 : tensor<3x3xf32>, tensor<3x4xf32>
}

// -----

// Attention stays one op, in destination style, for the target to expand:
// the forward into an empty [B, T, d], the gradient into an empty [B, T, 3d].
// CHECK-LABEL: func @attention
// CHECK: %[[O:.*]] = tensor.empty() : tensor<2x8x4xf32>
// CHECK: nova.attention_kernel ins(%{{.*}} : tensor<2x8x12xf32>) outs(%[[O]] : tensor<2x8x4xf32>) {heads = 2 : i64, scale = 5.000000e-01 : f64} -> tensor<2x8x4xf32>
// CHECK: %[[D:.*]] = tensor.empty() : tensor<2x8x12xf32>
// CHECK: nova.attention_kernel ins(%{{.*}}, %{{.*}} : tensor<2x8x12xf32>, tensor<2x8x4xf32>) outs(%[[D]] : tensor<2x8x12xf32>) {backward, heads = 2 : i64, scale = 5.000000e-01 : f64} -> tensor<2x8x12xf32>
func.func @attention(%x: tensor<2x8x12xf32>, %g: tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x12xf32>) {
  %0 = nova.causal_attention %x {heads = 2 : i64, scale = 0.5 : f64} : tensor<2x8x12xf32> -> tensor<2x8x4xf32>
  %1 = nova.causal_attention_grad %x, %g {heads = 2 : i64, scale = 0.5 : f64} : tensor<2x8x12xf32>, tensor<2x8x4xf32>
  return %0, %1 : tensor<2x8x4xf32>, tensor<2x8x12xf32>
}

// -----

// LayerNorm stays one op too: the forward and the input gradient.
// CHECK-LABEL: func @layer_norm
// CHECK: nova.layer_norm_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<4x8xf32>) {eps = 1.000000e-05 : f64} -> tensor<4x8xf32>
// CHECK: nova.layer_norm_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xf32>) {backward, eps = 1.000000e-05 : f64} -> tensor<4x8xf32>
func.func @layer_norm(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = nova.layer_norm %x, %g, %b {eps = 1.0e-5 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %1 = nova.layer_norm_grad %x, %g, %dy {eps = 1.0e-5 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Cross-entropy likewise: the per-row losses and the logits' gradient.
// CHECK-LABEL: func @cross_entropy
// CHECK: nova.cross_entropy_kernel ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4xi32>) outs(%{{.*}} : tensor<4xf32>) -> tensor<4xf32>
// CHECK: nova.cross_entropy_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4xi32>, tensor<4xf32>) outs(%{{.*}} : tensor<4x8xf32>) {backward} -> tensor<4x8xf32>
func.func @cross_entropy(%x: tensor<4x8xf32>, %y: tensor<4xi32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %0 = nova.cross_entropy %x, %y : tensor<4x8xf32>, tensor<4xi32>
  %1 = nova.cross_entropy_grad %x, %y, %g : tensor<4x8xf32>, tensor<4xi32>, tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4x8xf32>
}

// Every elementwise op is one all-parallel generic over empty outputs, its
// body the op's arith / math op (relu is max with 0, NaN kept; greater a
// compare and a select of 1 / 0).
// CHECK-LABEL: func @elementwise
// CHECK-NOT: nova.
// CHECK: arith.negf
// CHECK: math.exp
// CHECK: math.log
// CHECK: math.tanh
// CHECK: math.sqrt
// CHECK: math.rsqrt
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: math.erf
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK: arith.divf
// CHECK: arith.maximumf
// CHECK: arith.cmpf ogt
// CHECK: arith.select
func.func @elementwise(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = nova.neg %a : tensor<4xf32>
  %1 = nova.exp %a : tensor<4xf32>
  %2 = nova.log %a : tensor<4xf32>
  %3 = nova.tanh %a : tensor<4xf32>
  %4 = nova.sqrt %a : tensor<4xf32>
  %5 = nova.rsqrt %a : tensor<4xf32>
  %6 = nova.relu %a : tensor<4xf32>
  %7 = nova.erf %a : tensor<4xf32>
  %8 = nova.sub %a, %b : tensor<4xf32>, tensor<4xf32>
  %9 = nova.mul %a, %b : tensor<4xf32>, tensor<4xf32>
  %10 = nova.div %a, %b : tensor<4xf32>, tensor<4xf32>
  %11 = nova.max %a, %b : tensor<4xf32>, tensor<4xf32>
  %12 = nova.greater %a, %b : tensor<4xf32>, tensor<4xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// reduce_sum: a reduction generic over the summed axis. log_softmax: max,
// subtract, exp, sum, log, subtract (nova ops lowered in the same run).
// one_hot: the class index compared with the label. dropout: the element's
// row-major index through Philox4x32-10 (multiply-high rounds) against the
// rate.
// CHECK-LABEL: func @more
// CHECK-NOT: nova.
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: math.log
// CHECK: arith.subf
// CHECK: linalg.index 1
// CHECK: arith.index_cast
// CHECK: arith.cmpi eq
// CHECK: arith.mului_extended
// CHECK: arith.select
func.func @more(%x: tensor<2x5xf32>, %l: tensor<2xi32>, %s: tensor<i64>) -> (tensor<2xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>) {
  %0 = nova.reduce_sum %x {axes = array<i64: 1>, keep_dims = false} : tensor<2x5xf32>
  %1 = nova.log_softmax %x {axis = 1 : i64} : tensor<2x5xf32>
  %2 = nova.one_hot %l : tensor<2xi32> -> tensor<2x5xf32>
  %3 = nova.dropout %x, %s {rate = 0.5 : f64, stream = 3 : i64} : tensor<2x5xf32>, tensor<i64>
  return %0, %1, %2, %3 : tensor<2xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>
}
