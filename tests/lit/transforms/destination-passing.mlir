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
