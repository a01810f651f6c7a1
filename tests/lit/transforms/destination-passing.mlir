// RUN: nova-opt %s -nova-destination-passing -verify-each | FileCheck %s

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[X:.*]]: memref<4xf32>, %[[Y:.*]]: memref<2x2xf64>, %[[OUT0:.*]]: memref<4xf32>, %[[OUT1:.*]]: memref<4xf32>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK: %[[TX:.*]] = bufferization.to_tensor %[[X]] restrict : memref<4xf32>
// CHECK: bufferization.to_tensor %[[Y]] restrict : memref<2x2xf64>
// CHECK: %[[R:.*]] = arith.addf %[[TX]], %[[TX]]
// CHECK: bufferization.materialize_in_destination %[[R]] in restrict writable %[[OUT0]]
// CHECK: bufferization.materialize_in_destination %[[TX]] in restrict writable %[[OUT1]]
// CHECK: return{{$}}
func.func @step(%x: tensor<4xf32>, %y: tensor<2x2xf64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = arith.addf %x, %x : tensor<4xf32>
  return %0, %x : tensor<4xf32>, tensor<4xf32>
}

// Private helpers keep their signature.
// CHECK-LABEL: func.func private @helper(%{{.*}}: tensor<4xf32>) -> tensor<4xf32>
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// A result aliasing an argument is written back into it: no extra argument.
// CHECK-LABEL: func.func @update
// CHECK-SAME: (%[[P:.*]]: memref<4xf32>, %[[G:.*]]: memref<4xf32>, %{{.*}}: memref<f32>, %[[LOSS:.*]]: memref<f32>)
// CHECK: bufferization.to_tensor %[[P]] restrict writable
// CHECK: bufferization.to_tensor %[[G]] restrict :
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[LOSS]]
// CHECK: bufferization.materialize_in_destination %{{.*}} in writable %[[P]]
func.func @update(%p: tensor<4xf32>, %g: tensor<4xf32>, %l: tensor<f32>) -> (tensor<f32>, tensor<4xf32>)
    attributes {nova.result_aliases = array<i64: -1, 0>} {
  %0 = arith.subf %p, %g : tensor<4xf32>
  return %l, %0 : tensor<f32>, tensor<4xf32>
}

// A structured op computing an in-place result into a fresh tensor computes
// it into the argument it overwrites: its init becomes that argument.
// CHECK-LABEL: func.func @update_in_place
// CHECK-SAME: (%[[P:.*]]: memref<4xf32>, %[[G:.*]]: memref<4xf32>)
// CHECK: %[[TP:.*]] = bufferization.to_tensor %[[P]] restrict writable
// CHECK: %[[TG:.*]] = bufferization.to_tensor %[[G]] restrict :
// CHECK: %[[U:.*]] = linalg.generic {{.*}} ins(%[[TP]], %[[TG]] : {{.*}}) outs(%[[TP]] : tensor<4xf32>)
// CHECK: bufferization.materialize_in_destination %[[U]] in writable %[[P]]
func.func @update_in_place(%p: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32>
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
