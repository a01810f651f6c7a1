// RUN: nova-opt %s -nova-destination-passing -verify-each | FileCheck %s

// NOVA_IN_PLACE=0 (the module says so): the structured op that computes an
// in-place result keeps its fresh init, and the result is materialized
// into the argument it overwrites (a copy after bufferization).
// CHECK-LABEL: func.func @update_copied
// CHECK-SAME: (%[[P:.*]]: memref<4xf32>, %[[G:.*]]: memref<4xf32>)
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[U:.*]] = linalg.generic {{.*}} outs(%[[E]] : tensor<4xf32>)
// CHECK: bufferization.materialize_in_destination %[[U]] in writable %[[P]]
module attributes {nova.in_place = false} {
  func.func @update_copied(%p: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32>
      attributes {nova.result_aliases = array<i64: 0>} {
    %e = tensor.empty() : tensor<4xf32>
    %0 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
        ins(%p, %g : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %d = arith.subf %a, %b : f32
      linalg.yield %d : f32
    } -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
