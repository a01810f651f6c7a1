// RUN: nova-opt %s -nova-fold-transposes -verify-each -split-input-file | FileCheck %s

// Attention's head split: the matmul reads the permuted source in place.
// CHECK-LABEL: func @heads
// CHECK-NOT: linalg.transpose
// CHECK: %[[V:.*]] = memref.transpose %{{.*}} (d0, d1, d2, d3) -> (d0, d2, d1, d3)
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[V]] : {{.*}}memref<16x4x128x64xf32, strided<[32768, 64, 256, 1]>>)
func.func @heads(%q: memref<16x4x128x128xf32>, %v: memref<16x128x4x64xf32>, %out: memref<16x4x128x64xf32>) {
  %t = memref.alloc() : memref<16x4x128x64xf32>
  linalg.transpose ins(%v : memref<16x128x4x64xf32>) outs(%t : memref<16x4x128x64xf32>) permutation = [0, 2, 1, 3]
  linalg.generic {indexing_maps = [affine_map<(b, h, m, k, n) -> (b, h, m, k)>, affine_map<(b, h, m, k, n) -> (b, h, k, n)>, affine_map<(b, h, m, k, n) -> (b, h, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%q, %t : memref<16x4x128x128xf32>, memref<16x4x128x64xf32>) outs(%out : memref<16x4x128x64xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A transposed weight as the rhs: its view has a strided last dim but a
// unit-stride k dim, which the register kernel packs column by column.
// CHECK-LABEL: func @weight
// CHECK-NOT: linalg.transpose
// CHECK: %[[V:.*]] = memref.transpose %{{.*}} (d0, d1) -> (d1, d0)
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[V]] : {{.*}}memref<16x32xf32, strided<[1, 16]>>)
func.func @weight(%x: memref<8x16xf32>, %w: memref<32x16xf32>, %out: memref<8x32xf32>) {
  %t = memref.alloc() : memref<16x32xf32>
  linalg.transpose ins(%w : memref<32x16xf32>) outs(%t : memref<16x32xf32>) permutation = [1, 0]
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %t : memref<8x16xf32>, memref<16x32xf32>) outs(%out : memref<8x32xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The source is written after the transpose: the copy keeps the old values.
// CHECK-LABEL: func @overwritten
// CHECK: linalg.transpose
func.func @overwritten(%q: memref<4x8xf32>, %v: memref<8x4xf32>, %out: memref<4x4xf32>) {
  %t = memref.alloc() : memref<4x8xf32>
  linalg.transpose ins(%v : memref<8x4xf32>) outs(%t : memref<4x8xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%v : memref<8x4xf32>)
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%t, %v : memref<4x8xf32>, memref<8x4xf32>) outs(%out : memref<4x4xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The source is written only after the last reader (a weight's in-place
// update): the view is read before the write, so the copy goes.
// CHECK-LABEL: func @updated_after
// CHECK-NOT: linalg.transpose
// CHECK: memref.transpose
// CHECK: linalg.generic
// CHECK: linalg.fill
func.func @updated_after(%q: memref<4x8xf32>, %v: memref<8x4xf32>, %out: memref<4x4xf32>) {
  %t = memref.alloc() : memref<4x8xf32>
  linalg.transpose ins(%v : memref<8x4xf32>) outs(%t : memref<4x8xf32>) permutation = [1, 0]
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%t, %v : memref<4x8xf32>, memref<8x4xf32>) outs(%out : memref<4x4xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%v : memref<8x4xf32>)
  return
}
