// RUN: nova-opt %s -nova-vectorize-matmul=vector-bits=128 -verify-each -split-input-file | FileCheck %s

// 7x5 result, 4-lane vectors (NR = 8 columns is more than 5): the whole
// result is the column edge, a microkernel of two vectors, the second
// masked to its first lane (5 = 4 + 1) where the result is read and
// written; the rhs packed with zeros past column 5. No generic loops.
// CHECK-LABEL: func @small
// CHECK: %[[P:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x3x8xf32>
// CHECK: %[[M:.*]] = vector.constant_mask [1] : vector<4xi1>
// CHECK: vector.maskedload %{{.*}} : memref<3x5xf32>, vector<4xi1>, vector<4xf32> into vector<4xf32>
// CHECK: vector.store %{{.*}}, %[[P]]
// CHECK: vector.maskedload %{{.*}}, %[[M]], %{{.*}} : memref<7x5xf32>
// CHECK: vector.fma
// CHECK: vector.maskedstore %{{.*}}, %[[M]], %{{.*}} : memref<7x5xf32>
// CHECK-NOT: linalg.generic
func.func @small(%a: memref<7x3xf32>, %b: memref<3x5xf32>, %c: memref<7x5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<7x3xf32>, memref<3x5xf32>) outs(%c : memref<7x5xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Outside a configured kernel, 13x18 with 4-lane vectors and 6-row tiles is
// one block and one slab of K. The rhs columns [0, 16) are packed into two
// contiguous 9 x 8 micro-panels; row tiles [0, 12) sweep them with 12
// accumulators carried through the k loop (2 vector loads of the packed
// panel, 6 lhs broadcasts); row 12 gets a 1-row microkernel; columns 16..18
// (the column edge) a microkernel of one vector masked to 2 lanes, the
// rhs's edge panel packed with zeros past column 18.
// CHECK-LABEL: func @tiled
// CHECK: %[[PACK:.*]] = memref.alloca() {alignment = 64 : i64} : memref<3x9x8xf32>
// CHECK: scf.for
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: scf.for
// CHECK: vector.load %{{.*}} : memref<9x18xf32>, vector<4xf32>
// CHECK: vector.store %{{.*}}, %[[PACK]]
// CHECK: vector.maskedload %{{.*}} : memref<9x18xf32>
// CHECK: vector.store %{{.*}}, %[[PACK]]
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: scf.for
// CHECK-COUNT-12: vector.load %{{.*}} : memref<13x18xf32>, vector<4xf32>
// CHECK: scf.for {{.*}} iter_args
// CHECK-COUNT-2: vector.load %[[PACK]]
// CHECK: memref.load %{{.*}} : memref<13x9xf32>
// CHECK: vector.broadcast
// CHECK: vector.fma
// CHECK: scf.yield
// CHECK-COUNT-12: vector.store
// CHECK: scf.if
// CHECK-COUNT-6: vector.maskedload %{{.*}} : memref<13x18xf32>, vector<4xi1>, vector<4xf32> into vector<4xf32>
// CHECK: vector.fma
// CHECK-COUNT-6: vector.maskedstore %{{.*}} : memref<13x18xf32>, vector<4xi1>, vector<4xf32>
// CHECK: scf.if
// CHECK-COUNT-2: vector.load %{{.*}} : memref<13x18xf32>, vector<4xf32>
// CHECK: vector.fma
// CHECK: vector.maskedstore %{{.*}} : memref<13x18xf32>
// CHECK-NOT: linalg.generic
func.func @tiled(%a: memref<13x9xf32>, %b: memref<9x18xf32>, %c: memref<13x18xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<13x9xf32>, memref<9x18xf32>) outs(%c : memref<13x18xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// In a configured kernel the workgroup number picks the block: 24x64 with
// tiles [12, 32] is 2 x 2 blocks, wg -> (wg / 2, wg % 2), and K is swept in
// slabs of kc = 8 (two). Both extents are multiples of the register tile,
// so no edge code is emitted.
// CHECK-LABEL: func @kernel
// CHECK-SAME: (%[[WG:.*]]: index,
// CHECK: %[[PACK:.*]] = memref.alloca() {alignment = 64 : i64} : memref<4x8x8xf32>
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[N:.*]] = arith.remui %[[WG]], %[[C2]]
// CHECK: %[[M:.*]] = arith.divui %[[WG]], %[[C2]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c8
// CHECK: vector.fma {{.*}} : vector<4xf32>
// CHECK-NOT: scf.if
// CHECK-NOT: linalg.generic
module {
  module @kernels {
    func.func @kernel(%wg: index, %a: memref<24x16xf32>, %b: memref<16x64xf32>, %c: memref<24x64xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<matmul, workgroups = 4, tile = [12, 32], cache_tile = [8], register_tile = [6, 8]>} {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<24x16xf32>, memref<16x64xf32>) outs(%c : memref<24x64xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
  }
}

// -----

// A zero fill of the result right before the matmul is not done: the first
// slab's accumulators start at zero, the column edge's (18 = 16 + 2) too.
// In one slab (kc = K = 9 here) that is known when the kernel is built:
// the result is never loaded.
// CHECK-LABEL: func @zero_start
// CHECK-NOT: linalg.fill
// CHECK: arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK-NOT: vector.load %{{.*}} : memref<13x18xf32>, vector<4xf32>
// CHECK-NOT: vector.maskedload %{{.*}} : memref<13x18xf32>
// CHECK: vector.store %{{.*}}, %{{.*}} : memref<13x18xf32>, vector<4xf32>
// CHECK-NOT: vector.maskedload %{{.*}} : memref<13x18xf32>
// CHECK: vector.maskedstore %{{.*}} : memref<13x18xf32>
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.generic
func.func @zero_start(%a: memref<13x9xf32>, %b: memref<9x18xf32>, %c: memref<13x18xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<13x18xf32>)
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<13x9xf32>, memref<9x18xf32>) outs(%c : memref<13x18xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Untagged generics are left alone.
// CHECK-LABEL: func @untagged
// CHECK-NOT: vector.
// CHECK: linalg.generic
func.func @untagged(%a: memref<12x4xf32>, %b: memref<4x16xf32>, %c: memref<12x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x4xf32>, memref<4x16xf32>) outs(%c : memref<12x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A bias-add epilogue is applied to the register tiles on the last slab
// and stored into its output. In one slab (K = 8) every tile takes it: the
// result %c is never stored.
// CHECK-LABEL: func @bias_epilogue
// CHECK-SAME: %[[C:[^:]*]]: memref<12x16xf32>, %[[Y:[^:]*]]: memref<12x16xf32>
// CHECK-NOT: scf.if
// CHECK: vector.load %{{.*}} : memref<16xf32>, vector<4xf32>
// CHECK: arith.addf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: vector.store %{{.*}}, %[[Y]]{{.*}} : memref<12x16xf32>, vector<4xf32>
// CHECK-NOT: vector.store %{{.*}}, %[[C]]
// CHECK-NOT: linalg.generic
func.func @bias_epilogue(%a: memref<12x8xf32>, %b: memref<8x16xf32>, %bias: memref<16xf32>,
                         %c: memref<12x16xf32>, %y: memref<12x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x8xf32>, memref<8x16xf32>) outs(%c : memref<12x16xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%x: f32, %w: f32, %acc: f32):
    %p = arith.mulf %x, %w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (n)>, affine_map<(m, n) -> (m, n)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<12x16xf32>, memref<16xf32>) outs(%y : memref<12x16xf32>) {
  ^bb0(%v: f32, %bb: f32, %o: f32):
    %r = arith.addf %v, %bb : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A narrowing epilogue (its result a narrower float: the bias add rounded
// to bf16) on the f32 register kernel: each accumulator vector goes through
// the bias add and the rounding into the bf16 output; the f32 result %c is
// never stored.
// CHECK-LABEL: func @narrowing_epilogue
// CHECK-SAME: %[[C:[^:]*]]: memref<12x16xf32>, %[[Y:[^:]*]]: memref<12x16xbf16>
// CHECK: vector.fma
// CHECK: arith.addf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: arith.truncf %{{.*}} : vector<4xf32> to vector<4xbf16>
// CHECK: vector.store %{{.*}}, %[[Y]]{{.*}} : memref<12x16xbf16>, vector<4xbf16>
// CHECK-NOT: vector.store %{{.*}}, %[[C]]
// CHECK-NOT: linalg.generic
func.func @narrowing_epilogue(%a: memref<12x8xf32>, %b: memref<8x16xf32>, %bias: memref<16xf32>,
                              %c: memref<12x16xf32>, %y: memref<12x16xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x8xf32>, memref<8x16xf32>) outs(%c : memref<12x16xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%x: f32, %w: f32, %acc: f32):
    %p = arith.mulf %x, %w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (n)>, affine_map<(m, n) -> (m, n)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<12x16xf32>, memref<16xf32>) outs(%y : memref<12x16xbf16>) {
  ^bb0(%v: f32, %bb: f32, %o: bf16):
    %r = arith.addf %v, %bb : f32
    %t = arith.truncf %r : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// A heavy epilogue (a math op, or more than 8 ops: the MLP backward's GELU
// gradient) runs as a loop over the tile's vectors: the accumulators are
// stored to a [MR, NR / lanes, lanes] scratch, then each vector is loaded
// and taken through the epilogue, its constants left in registers.
// CHECK-LABEL: func @heavy_epilogue
// CHECK-SAME: %[[Y:[^:]*]]: memref<12x16xf32>) {
// CHECK: %[[S:.*]] = memref.alloca() {alignment = 64 : i64} : memref<6x2x4xf32>
// CHECK: vector.fma
// CHECK-COUNT-12: vector.store %{{.*}}, %[[S]]
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step
// CHECK: scf.for %[[V:.*]] = %{{.*}} to %{{.*}} step
// CHECK: vector.load %[[S]][%[[R]], %[[V]], %{{.*}}] : memref<6x2x4xf32>, vector<4xf32>
// CHECK: math.tanh
// CHECK: vector.store %{{.*}}, %[[Y]]
func.func @heavy_epilogue(%a: memref<12x8xf32>, %b: memref<8x16xf32>, %bias: memref<16xf32>,
                          %c: memref<12x16xf32>, %y: memref<12x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<12x8xf32>, memref<8x16xf32>) outs(%c : memref<12x16xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%x: f32, %w: f32, %acc: f32):
    %p = arith.mulf %x, %w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (n)>, affine_map<(m, n) -> (m, n)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<12x16xf32>, memref<16xf32>) outs(%y : memref<12x16xf32>) {
  ^bb0(%v: f32, %bb: f32, %o: f32):
    %t = math.tanh %v : f32
    %r = arith.mulf %t, %bb : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A transposed rhs view (k unit-stride), K = 10: the packed panel is
// filled from the view's columns (its transpose back, k contiguous), a
// 4 x 4 block at a time: four columns' runs of k loaded as vectors,
// transposed in registers (shuffles), stored as four rows kk of the panel;
// the k past the last whole block (10 = 2 x 4 + 2) element by element. The
// microkernel reads the panel as for a row-major rhs.
// CHECK-LABEL: func @rhs_columns
// CHECK: %[[P:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x10x8xf32>
// CHECK: %[[COLS:.*]] = memref.transpose %{{.*}} (d0, d1) -> (d1, d0) : memref<10x8xf32, strided<[1, 10]>> to memref<8x10xf32, strided<[10, 1]>>
// CHECK-COUNT-4: vector.load %[[COLS]][%{{.*}}, %{{.*}}] : memref<8x10xf32, strided<[10, 1]>>, vector<4xf32>
// CHECK: vector.shuffle
// CHECK-COUNT-4: vector.store %{{.*}}, %[[P]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<1x10x8xf32>, vector<4xf32>
// CHECK: %[[X:.*]] = memref.load %{{.*}} : memref<10x8xf32, strided<[1, 10]>>
// CHECK-NEXT: memref.store %[[X]], %[[P]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<1x10x8xf32>
// CHECK: vector.fma
func.func @rhs_columns(%a: memref<6x10xf32>, %wt: memref<8x10xf32>, %c: memref<6x8xf32>) {
  %w = memref.transpose %wt (d0, d1) -> (d1, d0) : memref<8x10xf32> to memref<10x8xf32, strided<[1, 10]>>
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %w : memref<6x10xf32>, memref<10x8xf32, strided<[1, 10]>>) outs(%c : memref<6x8xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Two slabs (kc = 8 of K = 16) in a configured kernel, with a zero fill and
// an epilogue: the first slab starts from zero (k0 == 0), the others from
// the stored sums; the last (k1 == K) goes through the epilogue, the
// others store the sums into the result.
// CHECK-LABEL: func @slabs_epilogue
// CHECK-SAME: %[[C:[^:]*]]: memref<12x8xf32>, %[[Y:[^:]*]]: memref<12x8xf32>
// CHECK: arith.cmpi eq
// CHECK: arith.cmpi eq
// CHECK: scf.if %{{.*}} -> (vector<4xf32>
// CHECK: arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK: } else {
// CHECK: vector.load %[[C]]
// CHECK: scf.if %{{.*}} {
// CHECK: math.tanh %{{.*}} : vector<4xf32>
// CHECK: vector.store %{{.*}}, %[[Y]]
// CHECK: } else {
// CHECK: vector.store %{{.*}}, %[[C]]
module {
  module @kernels {
    func.func @slabs_epilogue(%wg: index, %a: memref<12x16xf32>, %b: memref<16x8xf32>, %c: memref<12x8xf32>,
                              %y: memref<12x8xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<matmul, workgroups = 1, tile = [12, 8], cache_tile = [8], register_tile = [6, 8]>} {
      %zero = arith.constant 0.0 : f32
      linalg.fill ins(%zero : f32) outs(%c : memref<12x8xf32>)
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<12x16xf32>, memref<16x8xf32>) outs(%c : memref<12x8xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %w: f32, %acc: f32):
        %p = arith.mulf %x, %w : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>],
                      iterator_types = ["parallel", "parallel"]}
          ins(%c : memref<12x8xf32>) outs(%y : memref<12x8xf32>) {
      ^bb0(%v: f32, %o: f32):
        %r = math.tanh %v : f32
        linalg.yield %r : f32
      }
      return
    }
  }
}

// -----

// An epilogue that reads the result with its rows split ([12, 8] as
// [2, 6, 8], the graph's reshape) and another input in those dims: a
// register tile's row r is element (r / 6, r % 6) there. The placeholder
// of a result nova-drop-unstored-results took away is erased, unused.
// CHECK-LABEL: func @split_rows
// CHECK-NOT: memref.alloc()
// CHECK-NOT: memref.expand_shape
// CHECK: arith.remui %{{.*}}, %c6
// CHECK: arith.divui %{{.*}}, %c6
// CHECK: vector.load %{{.*}} : memref<2x6x8xf32>, vector<4xf32>
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: vector.store %{{.*}}, %{{.*}} : memref<2x6x8xf32>, vector<4xf32>
// CHECK-NOT: linalg.generic
module {
  module @kernels {
    func.func @split_rows(%wg: index, %a: memref<12x16xf32>, %b: memref<16x8xf32>, %g: memref<2x6x8xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<matmul, workgroups = 1, tile = [12, 8], cache_tile = [16], register_tile = [6, 8]>} {
      %c = memref.alloc() {nova.unstored} : memref<12x8xf32>
      %v = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 6, 8] : memref<12x8xf32> into memref<2x6x8xf32>
      %zero = arith.constant 0.0 : f32
      linalg.fill ins(%zero : f32) outs(%c : memref<12x8xf32>)
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<12x16xf32>, memref<16x8xf32>) outs(%c : memref<12x8xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %w: f32, %acc: f32):
        %p = arith.mulf %x, %w : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      linalg.generic {indexing_maps = [affine_map<(b, t, n) -> (b, t, n)>, affine_map<(b, t, n) -> (b, t, n)>],
                      iterator_types = ["parallel", "parallel", "parallel"]}
          ins(%v : memref<2x6x8xf32>) outs(%g : memref<2x6x8xf32>) {
      ^bb0(%r: f32, %o: f32):
        %m = arith.mulf %r, %o : f32
        linalg.yield %m : f32
      }
      return
    }
  }
}

// -----

// A row-major lhs computed by a fused producer (its exp): packed a row
// tile at a time, just before that tile's microkernels, row by row
// ([slots, MR, kc] = [1, 6, 16]), each row read 4 values along k at a time,
// the producer on them, stored as they come (no scatter); the microkernel
// reads packed[slot, r, kk].
// CHECK-LABEL: func @row_prologue
// CHECK: %[[P:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x6x16xf32>
// CHECK: vector.create_mask
// CHECK: vector.maskedload %{{.*}} : memref<12x16xf32>, vector<4xi1>, vector<4xf32> into vector<4xf32>
// CHECK: math.exp %{{.*}} : vector<4xf32>
// CHECK-NOT: vector.scatter
// CHECK: vector.maskedstore %[[P]][%{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: memref.load %[[P]][%{{.*}}, %c{{[0-9]+}}{{.*}}, %{{.*}}] : memref<1x6x16xf32>
// CHECK: vector.fma
module {
  module @kernels {
    func.func @row_prologue(%wg: index, %a: memref<12x16xf32>, %b: memref<16x8xf32>, %c: memref<12x8xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<matmul, workgroups = 1, tile = [12, 8], cache_tile = [16], register_tile = [6, 8]>} {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<12x16xf32>, memref<16x8xf32>) outs(%c : memref<12x8xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %w: f32, %acc: f32):
        %e = math.exp %x : f32
        %p = arith.mulf %e, %w : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
  }
}

// -----

// A transposed lhs computed by a fused producer (its exp), 20 rows in
// register tiles of MR = 6 on 4-lane vectors, packed 12 rows at a time
// (cache_tile[1]; lcm(6, 4) = 12 is also the default) just before their two
// row tiles run: slots [2, kc, 6]. Rows
// [0, 12) as one group of three whole vectors, the producer on each, each
// slot's six lanes shuffled out of the two vectors holding them (constant
// masks); rows [12, 18), a group of one tile, one slot alone (the producer
// on eight lanes, six enabled); the edge tile's two rows [18, 20) likewise.
// CHECK-LABEL: func @transposed_prologue
// CHECK: %[[P:.*]] = memref.alloca() {alignment = 64 : i64} : memref<2x16x6xf32>
// CHECK-DAG: %[[ALL:.*]] = vector.constant_mask [4] : vector<4xi1>
// CHECK-DAG: %[[SIX:.*]] = vector.constant_mask [6] : vector<8xi1>
// CHECK: scf.for
// The group's values two rows on are prefetched while this row's producer
// runs (the row, clamped to the last, 15, found once a row).
// CHECK: %[[AHEAD:.*]] = arith.minui %{{.*}}, %c15
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c12
// CHECK-COUNT-3: memref.prefetch %arg1[%[[AHEAD]], %{{.*}}], read, locality<3>, data : memref<16x20xf32>
// CHECK-COUNT-3: vector.maskedload %{{.*}}, %[[ALL]], %{{.*}} : memref<16x20xf32>, vector<4xi1>, vector<4xf32> into vector<4xf32>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 0, 0] : vector<4xf32>, vector<4xf32>
// CHECK: vector.maskedstore %[[P]][%{{.*}}, %{{.*}}, %{{.*}}], %[[SIX]], %{{.*}} : memref<2x16x6xf32>, vector<8xi1>, vector<8xf32>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [2, 3, 4, 5, 6, 7, 0, 0] : vector<4xf32>, vector<4xf32>
// CHECK: vector.maskedstore %[[P]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c6
// CHECK: vector.maskedload %{{.*}}, %[[SIX]], %{{.*}} : memref<16x20xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK: math.exp %{{.*}} : vector<8xf32>
// CHECK: vector.maskedstore %[[P]]
// CHECK: %[[TWO:.*]] = vector.constant_mask [2] : vector<8xi1>
// CHECK: vector.maskedload %{{.*}}, %[[TWO]]
// CHECK: vector.maskedstore %[[P]]{{.*}}, %[[TWO]]
// CHECK-NOT: vector.scatter
module {
  module @kernels {
    func.func @transposed_prologue(%wg: index, %a: memref<16x20xf32>, %b: memref<16x8xf32>, %c: memref<20x8xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<matmul, workgroups = 1, tile = [20, 8], cache_tile = [16, 12], register_tile = [6, 8]>} {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (k, m)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<16x20xf32>, memref<16x8xf32>) outs(%c : memref<20x8xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %w: f32, %acc: f32):
        %e = math.exp %x : f32
        %p = arith.mulf %e, %w : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
  }
}

// -----

// The same in f64 on 2-lane vectors: a slot's six lanes span three vectors,
// shuffled out of the first two and then the third.
// CHECK-LABEL: func @transposed_wide_slot
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<1x4x6xf64>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c6
// CHECK-COUNT-3: vector.maskedload {{.*}} into vector<2xf64>
// CHECK: %[[AB:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 0, 0, 0, 0] : vector<2xf64>, vector<2xf64>
// CHECK: vector.shuffle %[[AB]], %{{.*}} [0, 1, 2, 3, 8, 9, 6, 7] : vector<8xf64>, vector<2xf64>
module {
  module @kernels {
    func.func @transposed_wide_slot(%wg: index, %a: memref<4x12xf64>, %b: memref<4x2xf64>, %c: memref<12x2xf64>)
        attributes {nova.lowering_config = #nova.lowering_config<matmul, workgroups = 1, tile = [12, 2], cache_tile = [4], register_tile = [6, 2]>} {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (k, m)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<4x12xf64>, memref<4x2xf64>) outs(%c : memref<12x2xf64>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f64, %w: f64, %acc: f64):
        %p = arith.mulf %x, %w : f64
        %s = arith.addf %acc, %p : f64
        linalg.yield %s : f64
      }
      return
    }
  }
}
