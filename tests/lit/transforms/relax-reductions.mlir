// RUN: nova-opt %s -nova-relax-reductions -verify-each | FileCheck %s

// A row sum: its add may reassociate (and contract), so it vectorizes.
// CHECK-LABEL: func @row_sum
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
func.func @row_sum(%a: memref<4x64xf32>, %s: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<4x64xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// Elementwise ops stay strict.
// CHECK-LABEL: func @scale
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NOT: fastmath
func.func @scale(%a: memref<64xf32>, %b: memref<64xf32>) {
  %c = arith.constant 2.0 : f32
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%a : memref<64xf32>) outs(%b : memref<64xf32>) {
  ^bb0(%x: f32, %y: f32):
    %r = arith.mulf %x, %c : f32
    linalg.yield %r : f32
  }
  return
}
