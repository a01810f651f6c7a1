// RUN: nova-opt %s -nova-drop-unstored-results -verify-each -split-input-file | FileCheck %s

// @k0's matmul (K = 16 in one slab of 16, N = 8 whole register tiles, a
// zero fill) goes through its epilogue (a GELU-gradient-like product with
// the saved input, read with its rows split): its result buffer is never
// touched. Both launches lose it, and so does the step; the kernel gets the
// placeholder. @k1 sweeps K in two slabs (kc = 8): its partial sums are
// stored in the result, which stays.
// CHECK-LABEL: func.func @step
// CHECK-NOT: memref.alloc() {{.*}} : memref<12x8xf32>
// CHECK: nova.launch @kernels::@k0(%arg0, %arg1, %arg2) : memref<12x16xf32>, memref<16x8xf32>, memref<2x6x8xf32>
// CHECK: nova.launch @kernels::@k0(%arg0, %arg1, %arg3) : memref<12x16xf32>, memref<16x8xf32>, memref<2x6x8xf32>
// CHECK: %[[KEPT:.*]] = memref.alloc() : memref<12x8xf32>
// CHECK: nova.launch @kernels::@k1(%[[KEPT]], %arg0, %arg1, %arg2)
// CHECK: func.func @k0(%{{.*}}: index, %{{.*}}: memref<12x16xf32>, %{{.*}}: memref<16x8xf32>, %[[G:.*]]: memref<2x6x8xf32>)
// CHECK: %[[P:.*]] = memref.alloc() {nova.unstored} : memref<12x8xf32>
// CHECK: memref.expand_shape %[[P]]
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[P]] : memref<12x8xf32>)
// CHECK: func.func @k1(%{{.*}}: index, %{{.*}}: memref<12x8xf32>, %{{.*}}: memref<12x16xf32>, %{{.*}}: memref<16x8xf32>, %{{.*}}: memref<2x6x8xf32>)
// CHECK-NOT: nova.unstored
module {
  func.func @step(%a: memref<12x16xf32>, %b: memref<16x8xf32>, %g: memref<2x6x8xf32>, %h: memref<2x6x8xf32>) {
    %c0 = memref.alloc() : memref<12x8xf32>
    nova.launch @kernels::@k0(%c0, %a, %b, %g) : memref<12x8xf32>, memref<12x16xf32>, memref<16x8xf32>, memref<2x6x8xf32>
    %c1 = memref.alloc() : memref<12x8xf32>
    nova.launch @kernels::@k0(%c1, %a, %b, %h) : memref<12x8xf32>, memref<12x16xf32>, memref<16x8xf32>, memref<2x6x8xf32>
    %c2 = memref.alloc() : memref<12x8xf32>
    nova.launch @kernels::@k1(%c2, %a, %b, %g) : memref<12x8xf32>, memref<12x16xf32>, memref<16x8xf32>, memref<2x6x8xf32>
    return
  }
  module @kernels {
    func.func @k0(%wg: index, %c: memref<12x8xf32>, %a: memref<12x16xf32>, %b: memref<16x8xf32>, %g: memref<2x6x8xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<matmul, workgroups = 1, tile = [12, 8], cache_tile = [16], register_tile = [6, 8]>} {
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
    func.func @k1(%wg: index, %c: memref<12x8xf32>, %a: memref<12x16xf32>, %b: memref<16x8xf32>, %g: memref<2x6x8xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<matmul, workgroups = 1, tile = [12, 8], cache_tile = [8], register_tile = [6, 8]>} {
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

// The result buffer is read by a later launch too: kept. (With
// nova.in_place = false the pass does nothing at all: not shown.)
// CHECK-LABEL: func.func @read_later
// CHECK: %[[C:.*]] = memref.alloc() : memref<12x8xf32>
// CHECK: nova.launch @kernels::@k0(%[[C]],
// CHECK: nova.launch @kernels::@k1(%[[C]])
// CHECK-NOT: nova.unstored
module {
  func.func @read_later(%a: memref<12x16xf32>, %b: memref<16x8xf32>, %y: memref<12x8xf32>) {
    %c = memref.alloc() : memref<12x8xf32>
    nova.launch @kernels::@k0(%c, %a, %b, %y) : memref<12x8xf32>, memref<12x16xf32>, memref<16x8xf32>, memref<12x8xf32>
    nova.launch @kernels::@k1(%c) : memref<12x8xf32>
    return
  }
  module @kernels {
    func.func @k0(%wg: index, %c: memref<12x8xf32>, %a: memref<12x16xf32>, %b: memref<16x8xf32>, %y: memref<12x8xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<matmul, workgroups = 1, tile = [12, 8], cache_tile = [16], register_tile = [6, 8]>} {
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
      ^bb0(%r: f32, %o: f32):
        %t = math.tanh %r : f32
        linalg.yield %t : f32
      }
      return
    }
    func.func @k1(%wg: index, %c: memref<12x8xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0, 0], register_tile = []>} {
      return
    }
  }
}
