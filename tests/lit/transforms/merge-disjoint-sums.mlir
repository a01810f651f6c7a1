// RUN: nova-opt %s -nova-merge-disjoint-sums -verify-each -split-input-file | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// The fused QKV gradient: three column blocks covering the whole, so the
// sum is three inserts into an empty tensor, with no fill and no add.
// CHECK-LABEL: func @covering
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.generic
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x12xf32>
// CHECK: %[[A:.*]] = tensor.insert_slice %arg0 into %[[E]][0, 8] [4, 4] [1, 1]
// CHECK: %[[B:.*]] = tensor.insert_slice %arg1 into %[[A]][0, 4] [4, 4] [1, 1]
// CHECK: %[[C:.*]] = tensor.insert_slice %arg2 into %[[B]][0, 0] [4, 4] [1, 1]
// CHECK: return %[[C]]
func.func @covering(%q: tensor<4x4xf32>, %k: tensor<4x4xf32>, %v: tensor<4x4xf32>) -> tensor<4x12xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x12xf32>) -> tensor<4x12xf32>
  %i0 = tensor.insert_slice %q into %f0[0, 8] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x12xf32>
  %e1 = tensor.empty() : tensor<4x12xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x12xf32>) -> tensor<4x12xf32>
  %i1 = tensor.insert_slice %k into %f1[0, 4] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x12xf32>
  %e2 = tensor.empty() : tensor<4x12xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x12xf32>) -> tensor<4x12xf32>
  %i2 = tensor.insert_slice %v into %f2[0, 0] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x12xf32>
  %out = tensor.empty() : tensor<4x12xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%i0, %i1, %i2 : tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x12xf32>) outs(%out : tensor<4x12xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %ab = arith.addf %a, %b : f32
    %abc = arith.addf %ab, %c : f32
    linalg.yield %abc : f32
  } -> tensor<4x12xf32>
  return %s : tensor<4x12xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Two blocks leaving a gap: one fill remains, under both inserts.
// CHECK-LABEL: func @gap
// CHECK-NOT: linalg.generic
// CHECK: %[[F:.*]] = linalg.fill
// CHECK: %[[A:.*]] = tensor.insert_slice %arg0 into %[[F]][0, 0] [4, 4] [1, 1]
// CHECK: tensor.insert_slice %arg1 into %[[A]][0, 8] [4, 4] [1, 1]
// CHECK-NOT: linalg.fill
func.func @gap(%q: tensor<4x4xf32>, %v: tensor<4x4xf32>) -> tensor<4x12xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x12xf32>) -> tensor<4x12xf32>
  %i0 = tensor.insert_slice %q into %f0[0, 0] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x12xf32>
  %e1 = tensor.empty() : tensor<4x12xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x12xf32>) -> tensor<4x12xf32>
  %i1 = tensor.insert_slice %v into %f1[0, 8] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x12xf32>
  %out = tensor.empty() : tensor<4x12xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%i0, %i1 : tensor<4x12xf32>, tensor<4x12xf32>) outs(%out : tensor<4x12xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %ab = arith.addf %a, %b : f32
    linalg.yield %ab : f32
  } -> tensor<4x12xf32>
  return %s : tensor<4x12xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Overlapping boxes really add: left alone.
// CHECK-LABEL: func @overlap
// CHECK: linalg.generic
// CHECK: arith.addf
func.func @overlap(%q: tensor<4x4xf32>, %v: tensor<4x4xf32>) -> tensor<4x12xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x12xf32>) -> tensor<4x12xf32>
  %i0 = tensor.insert_slice %q into %f0[0, 0] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x12xf32>
  %e1 = tensor.empty() : tensor<4x12xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x12xf32>) -> tensor<4x12xf32>
  %i1 = tensor.insert_slice %v into %f1[0, 2] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x12xf32>
  %out = tensor.empty() : tensor<4x12xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%i0, %i1 : tensor<4x12xf32>, tensor<4x12xf32>) outs(%out : tensor<4x12xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %ab = arith.addf %a, %b : f32
    linalg.yield %ab : f32
  } -> tensor<4x12xf32>
  return %s : tensor<4x12xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Not a plain sum (a product): left alone.
// CHECK-LABEL: func @product
// CHECK: arith.mulf
func.func @product(%q: tensor<4x4xf32>, %v: tensor<4x4xf32>) -> tensor<4x12xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x12xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x12xf32>) -> tensor<4x12xf32>
  %i0 = tensor.insert_slice %q into %f0[0, 0] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x12xf32>
  %e1 = tensor.empty() : tensor<4x12xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x12xf32>) -> tensor<4x12xf32>
  %i1 = tensor.insert_slice %v into %f1[0, 8] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x12xf32>
  %out = tensor.empty() : tensor<4x12xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%i0, %i1 : tensor<4x12xf32>, tensor<4x12xf32>) outs(%out : tensor<4x12xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %ab = arith.mulf %a, %b : f32
    linalg.yield %ab : f32
  } -> tensor<4x12xf32>
  return %s : tensor<4x12xf32>
}
