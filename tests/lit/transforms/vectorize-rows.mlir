// RUN: nova-opt %s -nova-vectorize-rows=vector-bits=128 -verify-each -split-input-file | FileCheck %s

// Forward LayerNorm of 10 rows of 8 (4 lanes: 2 vectors a row) in
// workgroups of 4 rows, 2 rows interleaved: rows [wg * 4, min(wg * 4 + 4,
// 10)), whole pairs then single rows. Three passes per block: the sums, the
// centered squares, the result; two independent chains per pass. A row's
// lanes are summed in any order (reassoc: a tree, not a chain).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[WG:[^:]*]]: index, %[[X:[^:]*]]: memref<10x8xf32>, %[[G:[^:]*]]: memref<8xf32>, %[[B:[^:]*]]: memref<8xf32>, %[[Y:[^:]*]]: memref<10x8xf32>)
// CHECK: %[[LO:.*]] = arith.muli %[[WG]], %c4
// CHECK: scf.for %[[R0:.*]] = %[[LO]] to %{{.*}} step %c2
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>)
// CHECK: arith.addf {{.*}} : vector<4xf32>
// CHECK: vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<4xf32> into f32
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>)
// CHECK: vector.fma
// CHECK: math.sqrt
// CHECK: vector.load %[[G]]
// CHECK: vector.load %[[B]]
// CHECK: vector.store {{.*}}, %[[Y]]
// The rows left over, one at a time.
// CHECK: scf.for {{.*}} step %c1
// CHECK-NOT: nova.layer_norm_kernel
func.func @forward(%wg: index, %x: memref<10x8xf32>, %g: memref<8xf32>, %b: memref<8xf32>, %y: memref<10x8xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<rows, workgroups = 3, tile = [4], register_tile = [2, 4]>} {
  nova.layer_norm_kernel ins(%x, %g, %b : memref<10x8xf32>, memref<8xf32>, memref<8xf32>) outs(%y : memref<10x8xf32>) {eps = 1.0e-5 : f64}
  return
}

// -----

// Backward, rank 3 viewed as [6, 8] rows: the statistics again, the two
// gradient sums (2 values a row carried), then dx.
// CHECK-LABEL: func.func @backward
// CHECK: memref.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : memref<2x3x8xf32> into memref<6x8xf32>
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK: vector.store
func.func @backward(%wg: index, %x: memref<2x3x8xf32>, %g: memref<8xf32>, %dy: memref<2x3x8xf32>, %dx: memref<2x3x8xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<rows, workgroups = 1, tile = [6], register_tile = [2, 4]>} {
  nova.layer_norm_kernel ins(%x, %g, %dy : memref<2x3x8xf32>, memref<8xf32>, memref<2x3x8xf32>) outs(%dx : memref<2x3x8xf32>) {eps = 1.0e-5 : f64, backward}
  return
}

// -----

// Strided views (a slice feeding the op, the op writing into a view) are
// copied to and from contiguous buffers; a strided output is computed whole
// by workgroup 0, so no workgroup writes another's rows.
// CHECK-LABEL: func.func @strided
// CHECK-SAME: (%[[WG:[^:]*]]: index, %[[X:[^:]*]]: memref<4x8xf32, strided<[16, 1]>>
// CHECK: %[[XC:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK: linalg.copy ins(%[[X]] : {{.*}}) outs(%[[XC]] : memref<4x8xf32>)
// CHECK: %[[YC:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[WG]], %c0
// CHECK: scf.if %[[FIRST]]
// CHECK: vector.load %[[XC]]
// CHECK: linalg.copy ins(%[[YC]] : memref<4x8xf32>)
// CHECK: memref.dealloc %[[XC]]
// CHECK: memref.dealloc %[[YC]]
func.func @strided(%wg: index, %x: memref<4x8xf32, strided<[16, 1]>>, %g: memref<8xf32>, %b: memref<8xf32>, %y: memref<4x8xf32, strided<[16, 1], offset: 8>>)
    attributes {nova.lowering_config = #nova.lowering_config<rows, workgroups = 2, tile = [2], register_tile = [2, 4]>} {
  nova.layer_norm_kernel ins(%x, %g, %b : memref<4x8xf32, strided<[16, 1]>>, memref<8xf32>, memref<8xf32>) outs(%y : memref<4x8xf32, strided<[16, 1], offset: 8>>) {eps = 1.0e-5 : f64}
  return
}

// -----

// Cross-entropy forward, logits [2, 5, 8] viewed as 10 rows of 8, labels
// [2, 5] as 10: per block of 2 rows a pass for the maxes (from -inf), one
// for the sums of exp(x - max) and their totals, then per row its label's
// logit (column 0 for a label outside [0, 8)) and the loss log(s) - (x[y] -
// max), 0 for such a label. The maxima ignore the sign of zero (nsz, NaNs
// still propagate), the sums their order (reassoc).
// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[WG:[^:]*]]: index, %[[X:[^:]*]]: memref<2x5x8xf32>, %[[Y:[^:]*]]: memref<2x5xi32>, %[[L:[^:]*]]: memref<2x5xf32>)
// CHECK-DAG: %[[XR:.*]] = memref.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : memref<2x5x8xf32> into memref<10x8xf32>
// CHECK-DAG: %[[YR:.*]] = memref.collapse_shape %[[Y]] {{\[}}[0, 1]] : memref<2x5xi32> into memref<10xi32>
// CHECK-DAG: %[[LR:.*]] = memref.collapse_shape %[[L]] {{\[}}[0, 1]] : memref<2x5xf32> into memref<10xf32>
// CHECK: scf.for %[[R0:.*]] = %{{.*}} to %{{.*}} step %c2
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>)
// CHECK: arith.maximumf {{.*}} fastmath<nsz> : vector<4xf32>
// CHECK: vector.reduction <maximumf>, %{{.*}} fastmath<nsz>
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>)
// CHECK: math.exp {{.*}} : vector<4xf32>
// CHECK: vector.reduction <add>, %{{.*}} fastmath<reassoc>
// CHECK: memref.load %[[YR]]
// CHECK: arith.index_cast
// CHECK: %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %c8
// CHECK: %[[COL:.*]] = arith.select %[[IN]]
// CHECK: memref.load %[[XR]][%{{.*}}, %[[COL]]]
// CHECK: math.log
// CHECK: %[[LOSS:.*]] = arith.subf
// CHECK: %[[KEPT:.*]] = arith.select %[[IN]], %[[LOSS]]
// CHECK: memref.store %[[KEPT]], %[[LR]]
// CHECK-NOT: nova.cross_entropy_kernel
func.func @cross_entropy(%wg: index, %x: memref<2x5x8xf32>, %y: memref<2x5xi32>, %l: memref<2x5xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<rows, workgroups = 2, tile = [5], register_tile = [2, 4]>} {
  nova.cross_entropy_kernel ins(%x, %y : memref<2x5x8xf32>, memref<2x5xi32>) outs(%l : memref<2x5xf32>)
  return
}

// -----

// Backward: the max and sum again, dx = exp(x - max) g / s stored a vector
// at a time, then dx[y] -= g (g taken as 0 for a label outside [0, 8)).
// CHECK-LABEL: func.func @cross_entropy_grad
// CHECK-SAME: (%[[WG:[^:]*]]: index, %[[X:[^:]*]]: memref<3x8xf32>, %[[Y:[^:]*]]: memref<3xi64>, %[[G:[^:]*]]: memref<3xf32>, %[[DX:[^:]*]]: memref<3x8xf32>)
// CHECK: vector.reduction <maximumf>
// CHECK: %[[IN:.*]] = arith.cmpi ult
// CHECK: %[[COL:.*]] = arith.select %[[IN]]
// CHECK: %[[GR:.*]] = memref.load %[[G]]
// CHECK: %[[TAKEN:.*]] = arith.select %[[IN]], %[[GR]]
// CHECK: arith.divf %[[TAKEN]]
// CHECK: scf.for
// CHECK: math.exp
// CHECK: vector.store {{.*}}, %[[DX]]
// CHECK: %[[HELD:.*]] = memref.load %[[DX]][%{{.*}}, %[[COL]]]
// CHECK: %[[FIXED:.*]] = arith.subf %[[HELD]], %[[TAKEN]]
// CHECK: memref.store %[[FIXED]], %[[DX]][%{{.*}}, %[[COL]]]
func.func @cross_entropy_grad(%wg: index, %x: memref<3x8xf32>, %y: memref<3xi64>, %g: memref<3xf32>, %dx: memref<3x8xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<rows, workgroups = 1, tile = [3], register_tile = [1, 4]>} {
  nova.cross_entropy_kernel ins(%x, %y, %g : memref<3x8xf32>, memref<3xi64>, memref<3xf32>) outs(%dx : memref<3x8xf32>) {backward}
  return
}

// -----

// A row of 10 classes in vectors of 4: two whole vectors, then the last 2
// columns under a mask (lanes past the row read -inf: nothing to the max,
// exp(-inf) = 0 to the sum); backward, the partial vector's store is
// masked too.
// CHECK-LABEL: func.func @cross_entropy_tail
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2{{.*}} step %{{.*}} iter_args({{.*}}) -> (vector<4xf32>)
// CHECK: %[[MASK:.*]] = vector.create_mask %c2{{.*}} : vector<4xi1>
// CHECK: vector.maskedload %{{.*}}[%{{.*}}, %c8{{.*}}], %[[MASK]], %{{.*}} : memref<3x10xf32>, vector<4xi1>, vector<4xf32> into vector<4xf32>
// CHECK: arith.maximumf
// CHECK: vector.reduction <maximumf>
// CHECK: vector.maskedstore %{{.*}}[%{{.*}}, %c8{{.*}}], %{{.*}}, %{{.*}} : memref<3x10xf32>, vector<4xi1>, vector<4xf32>
func.func @cross_entropy_tail(%wg: index, %x: memref<3x10xf32>, %y: memref<3xi32>, %g: memref<3xf32>, %dx: memref<3x10xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<rows, workgroups = 1, tile = [3], register_tile = [1, 4]>} {
  nova.cross_entropy_kernel ins(%x, %y, %g : memref<3x10xf32>, memref<3xi32>, memref<3xf32>) outs(%dx : memref<3x10xf32>) {backward}
  return
}

// -----

// With the row statistics (nova-share-row-statistics): the forward stores
// each row's max and sum beside its loss; the backward loads them and
// makes one pass, no reductions: dx = exp(x - max) g / s, then dx[y] -= g.
// CHECK-LABEL: func.func @cross_entropy_stats
// CHECK-SAME: (%[[WG:[^:]*]]: index, %[[X:[^:]*]]: memref<3x8xf32>, %[[Y:[^:]*]]: memref<3xi32>, %[[L:[^:]*]]: memref<3xf32>, %[[S:[^:]*]]: memref<3x2xf32>, %[[G:[^:]*]]: memref<3xf32>, %[[DX:[^:]*]]: memref<3x8xf32>)
// CHECK: %[[MAX:.*]] = vector.reduction <maximumf>
// CHECK: %[[SUM:.*]] = vector.reduction <add>
// CHECK: memref.store %{{.*}}, %[[L]]
// CHECK: memref.store %[[MAX]], %[[S]][%{{.*}}, %c0{{.*}}]
// CHECK: memref.store %[[SUM]], %[[S]][%{{.*}}, %c1{{.*}}]
// CHECK: %[[M:.*]] = memref.load %[[S]][%{{.*}}, %c0{{.*}}]
// CHECK: %[[T:.*]] = memref.load %[[S]][%{{.*}}, %c1{{.*}}]
// CHECK-NOT: vector.reduction
// CHECK: arith.divf %{{.*}}, %[[T]]
// CHECK: scf.for
// CHECK: vector.broadcast %[[M]]
// CHECK: math.exp
// CHECK: vector.store {{.*}}, %[[DX]]
// CHECK-NOT: vector.reduction
// CHECK: return
func.func @cross_entropy_stats(%wg: index, %x: memref<3x8xf32>, %y: memref<3xi32>, %l: memref<3xf32>, %s: memref<3x2xf32>,
                               %g: memref<3xf32>, %dx: memref<3x8xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<rows, workgroups = 1, tile = [3], register_tile = [1, 4]>} {
  nova.cross_entropy_kernel ins(%x, %y : memref<3x8xf32>, memref<3xi32>) outs(%l, %s : memref<3xf32>, memref<3x2xf32>)
  nova.cross_entropy_kernel ins(%x, %y, %g, %s : memref<3x8xf32>, memref<3xi32>, memref<3xf32>, memref<3x2xf32>) outs(%dx : memref<3x8xf32>) {backward}
  return
}

// -----

// LayerNorm with the row statistics: the forward stores each row's mean
// and rstd after its two statistics passes; the backward loads them and
// makes its last two passes only (the gradient sums, then dx).
// CHECK-LABEL: func.func @layer_norm_stats
// CHECK-SAME: (%[[WG:[^:]*]]: index, %[[X:[^:]*]]: memref<3x8xf32>, %[[GAMMA:[^:]*]]: memref<8xf32>, %[[BETA:[^:]*]]: memref<8xf32>, %[[Y:[^:]*]]: memref<3x8xf32>, %[[S:[^:]*]]: memref<3x2xf32>, %[[G:[^:]*]]: memref<3x8xf32>, %[[DX:[^:]*]]: memref<3x8xf32>)
// CHECK: %[[MEAN:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: %[[RSTD:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: memref.store %[[MEAN]], %[[S]][%{{.*}}, %c0{{.*}}]
// CHECK: memref.store %[[RSTD]], %[[S]][%{{.*}}, %c1{{.*}}]
// CHECK: vector.store {{.*}}, %[[Y]]
// CHECK: memref.load %[[S]][%{{.*}}, %c0{{.*}}]
// CHECK: memref.load %[[S]][%{{.*}}, %c1{{.*}}]
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>)
// CHECK-NOT: math.sqrt
// CHECK: vector.store {{.*}}, %[[DX]]
// CHECK-NOT: math.sqrt
// CHECK: return
func.func @layer_norm_stats(%wg: index, %x: memref<3x8xf32>, %gamma: memref<8xf32>, %beta: memref<8xf32>, %y: memref<3x8xf32>,
                            %s: memref<3x2xf32>, %g: memref<3x8xf32>, %dx: memref<3x8xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<rows, workgroups = 1, tile = [3], register_tile = [1, 4]>} {
  nova.layer_norm_kernel ins(%x, %gamma, %beta : memref<3x8xf32>, memref<8xf32>, memref<8xf32>) outs(%y, %s : memref<3x8xf32>, memref<3x2xf32>) {eps = 1.0e-5 : f64}
  nova.layer_norm_kernel ins(%x, %gamma, %g, %s : memref<3x8xf32>, memref<8xf32>, memref<3x8xf32>, memref<3x2xf32>) outs(%dx : memref<3x8xf32>) {backward, eps = 1.0e-5 : f64}
  return
}
