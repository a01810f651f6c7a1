// RUN: nova-opt %s -nova-vectorize-matmul=vector-bits=128 -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-vectorize-matmul="vector-bits=128 parallel-min-flops=0" -verify-each | FileCheck %s --check-prefix=PAR

// Big enough kernels run their column tiles as an scf.parallel (threads).
// PAR-LABEL: func @tiled
// PAR: scf.parallel
// PAR: scf.for
// PAR: vector.fma

// 7x5 result, 4-lane vectors (NR = 8 columns is more than 5): no kernel; the
// leftover rows cover everything.
// CHECK-LABEL: func @small
// CHECK-NOT: vector.fma
// CHECK: linalg.generic
// CHECK-NOT: nova.kernel
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

// 13x18 result with 4-lane vectors and 6-row tiles: a 12x16 kernel
// (column tiles outside, row tiles inside, 12 accumulators carried through
// the k loop), then columns 16..18 of rows 0..12 and row 12 as generics on
// subviews.
// CHECK-LABEL: func @tiled
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-COUNT-12: vector.load %{{.*}} : memref<13x18xf32>, vector<4xf32>
// CHECK: scf.for {{.*}} iter_args
// CHECK-COUNT-2: vector.load %{{.*}} : memref<9x18xf32>, vector<4xf32>
// CHECK: memref.load %{{.*}} : memref<13x9xf32>
// CHECK: vector.broadcast
// CHECK: vector.fma
// CHECK: scf.yield
// CHECK-COUNT-12: vector.store
// CHECK: memref.subview %{{.*}}[0, 16] [12, 2] [1, 1]
// CHECK: linalg.generic
// CHECK: memref.subview %{{.*}}[12, 0] [1, 18] [1, 1]
// CHECK: linalg.generic
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
