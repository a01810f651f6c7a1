// RUN: nova-opt %s -nova-vectorize-attention=vector-bits=64 -verify-each -split-input-file -verify-diagnostics | FileCheck %s

// Forward, B 2 x heads 2 = 4 workgroups, T = 13, hd = 2 (f32, 2 lanes).
// Workgroup wg is head (wg / 2, wg % 2); k of the head is transposed into a
// [hd, T'] scratch (T' = 14: whole vectors, zero-padded); rows go in blocks
// of 4, the last one moved back to rows 9..12 (13 = 3 x 4 + 1: row 9..11
// are computed again, not a second copy of the code for the row left),
// their scores in a [4, 14] scratch: no 13 x 13 buffer anywhere. Score columns in groups of 2 vectors, then single
// vectors (register_tile [4, 2]: 1 vector of 2 lanes per group); the key
// loop of each product carries 4 x 1 accumulators.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[WG:[^:]*]]: index, %[[QKV:[^:]*]]: memref<2x13x12xf32>, %[[OUT:[^:]*]]: memref<2x13x4xf32>)
// CHECK-NOT: memref<13x13
// CHECK-DAG: %[[B:.*]] = arith.divui %[[WG]], %c2
// CHECK-DAG: %[[H:.*]] = arith.remui %[[WG]], %c2
// CHECK: %[[KT:.*]] = memref.alloc() : memref<2x14xf32>
// CHECK: %[[S:.*]] = memref.alloc() : memref<4x14xf32>
// CHECK: memref.store {{.*}}, %[[KT]]
// CHECK: scf.for %[[I:.*]] = %c0{{.*}} to %c13{{.*}} step %c4
// CHECK: arith.minui %[[I]], %c9
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<2xf32>, vector<2xf32>, vector<2xf32>, vector<2xf32>) {
// CHECK: vector.load %[[KT]]
// CHECK: vector.broadcast
// CHECK: vector.fma
// The masked softmax of each row: -inf above the diagonal, max (either
// zero for the other), exp, sum (its lanes in any order).
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: arith.maximumf {{.*}} fastmath<nsz> : vector<2xf32>
// CHECK: vector.reduction <maximumf>, %{{.*}} fastmath<nsz>
// CHECK: math.exp {{.*}} : vector<2xf32>
// CHECK: vector.reduction <add>, %{{.*}} fastmath<reassoc>
// out = (e v) / sum, straight into the head's columns of out.
// CHECK: vector.store {{.*}}, %[[OUT]][%[[B]], {{.*}}] : memref<2x13x4xf32>, vector<2xf32>
// CHECK-NOT: vector.fma
// CHECK: memref.dealloc %[[KT]]
// CHECK: memref.dealloc %[[S]]
// CHECK-NOT: nova.attention_kernel
func.func @forward(%wg: index, %x: memref<2x13x12xf32>, %o: memref<2x13x4xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<attention, workgroups = 4, tile = [1, 1], register_tile = [4, 2]>} {
  nova.attention_kernel ins(%x : memref<2x13x12xf32>) outs(%o : memref<2x13x4xf32>) {heads = 2 : i64, scale = 0.5 : f64}
  return
}

// -----

// Backward, register_tile [4, 4]: 4 x 2 accumulators; cache_tile [8]: the
// 8 rows are one block of two register blocks, their P and dS in [8, 8]
// scratches, dk and dv accumulated once for the block. v is transposed
// too; dk and dv of the head are accumulated in place (the head's rows are
// one workgroup's), nothing zeroed first: the keys an earlier block reached
// (from 0 to the block's first row) are loaded, added to and stored, the
// block's own keys set from accumulators that start at 0; dq written row
// block by row block; four scratch buffers (here T = 8 is the block).
// CHECK-LABEL: func.func @backward
// CHECK-SAME: (%[[WG:[^:]*]]: index, %[[QKV:[^:]*]]: memref<1x8x24xf32>, %[[G:[^:]*]]: memref<1x8x8xf32>, %[[D:[^:]*]]: memref<1x8x24xf32>)
// CHECK: %[[KT:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK: %[[S:.*]] = memref.alloc() : memref<8x8xf32>
// CHECK: %[[VT:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK: %[[DP:.*]] = memref.alloc() : memref<8x8xf32>
// CHECK-NOT: vector.store {{.*}}, %[[D]]
// CHECK: scf.for %[[I0:.*]] = %c0{{.*}} to %c8{{.*}} step %c8
// CHECK-NOT: vector.store {{.*}}, %[[D]]
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<2xf32>, vector<2xf32>, vector<2xf32>, vector<2xf32>, vector<2xf32>, vector<2xf32>, vector<2xf32>, vector<2xf32>) {
// CHECK: math.exp
// CHECK: vector.load %[[VT]]
// CHECK: vector.store {{.*}}, %[[DP]]
// dk's keys before the block: R = 4 at a time, loaded, accumulated, stored.
// CHECK: %[[FROM:.*]] = arith.addi %[[I0]], %c0
// CHECK: %[[OLD:.*]] = arith.divui %[[FROM]], %c4
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[OLD]]
// CHECK: %[[LOADED:.*]] = vector.load %[[D]]
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[LOADED]],
// CHECK: vector.fma
// CHECK: vector.store {{.*}}, %[[D]]
// Its own keys: from 0, nothing loaded.
// CHECK: %[[OWN:.*]] = arith.subi %{{.*}}, %[[FROM]]
// CHECK: %[[NEW:.*]] = arith.divui %[[OWN]], %c4
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[NEW]]
// CHECK-NOT: vector.load %[[D]]
// CHECK: scf.for {{.*}} iter_args(%{{[^ ]*}} = %cst{{[_0-9]*}},
// CHECK-NOT: vector.load %[[D]]
// CHECK: vector.fma
// CHECK: vector.store {{.*}}, %[[D]]
// CHECK: memref.dealloc %[[DP]]
func.func @backward(%wg: index, %x: memref<1x8x24xf32>, %g: memref<1x8x8xf32>, %d: memref<1x8x24xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<attention, workgroups = 2, tile = [1, 1], cache_tile = [8], register_tile = [4, 4]>} {
  nova.attention_kernel ins(%x, %g : memref<1x8x24xf32>, memref<1x8x8xf32>) outs(%d : memref<1x8x24xf32>) {heads = 2 : i64, scale = 0.5 : f64, backward}
  return
}

// -----

// Backward, T = 10 in blocks of 8 (register_tile [4, 4], cache_tile [8]):
// the second block is moved back to rows 2..9, its first 6 rows (done by
// the first block) computed again, their share of dk and dv skipped: the
// key products' row loops start at skip = i - min(i, 2). The keys of a
// block end at 8 (a multiple of 4) or at 10 (2 left, one group of 2 keys).
// CHECK-LABEL: func.func @backward_rest
// CHECK: scf.for %[[I:.*]] = %c0{{.*}} to %c10{{.*}} step %c8
// CHECK: %[[I0:.*]] = arith.minui %[[I]], %c2
// CHECK: %[[SKIP:.*]] = arith.subi %[[I]], %[[I0]]
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c8{{.*}} step %c4
// CHECK: scf.for %{{.*}} = %[[SKIP]] to %c8{{.*}} step %c1{{.*}} iter_args
// CHECK: arith.cmpi eq, %{{.*}}, %c2
// CHECK: scf.if
// CHECK: scf.for %{{.*}} = %[[SKIP]] to %c8{{.*}} step %c1{{.*}} iter_args({{.*}}) -> (vector<2xf32>, vector<2xf32>, vector<2xf32>, vector<2xf32>)
// CHECK: memref.dealloc
func.func @backward_rest(%wg: index, %x: memref<1x10x24xf32>, %g: memref<1x10x8xf32>, %d: memref<1x10x24xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<attention, workgroups = 2, tile = [1, 1], cache_tile = [8], register_tile = [4, 4]>} {
  nova.attention_kernel ins(%x, %g : memref<1x10x24xf32>, memref<1x10x8xf32>) outs(%d : memref<1x10x24xf32>) {heads = 2 : i64, scale = 0.5 : f64, backward}
  return
}

// -----

// A config that does not cover the heads is refused.
func.func @wrong_workgroups(%wg: index, %x: memref<2x8x12xf32>, %o: memref<2x8x4xf32>)
    attributes {nova.lowering_config = #nova.lowering_config<attention, workgroups = 3, tile = [1, 1], register_tile = [4, 2]>} {
  // expected-error @+1 {{nova-vectorize-attention: 3 workgroups for 4 heads}}
  nova.attention_kernel ins(%x : memref<2x8x12xf32>) outs(%o : memref<2x8x4xf32>) {heads = 2 : i64, scale = 0.5 : f64}
  return
}
