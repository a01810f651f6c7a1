// RUN: nova-opt %s -nova-dedup-kernels -verify-each | FileCheck %s

// @k2 is @k0 under another name: its launch is redirected and it is erased.
// @k3 is @k0 too but for the mark of a recomputed op (nova-rematerialize's
// nova.rematerialized), which is dropped. @k1 differs (another constant)
// and stays.
// CHECK-LABEL: func.func @step
// CHECK-NEXT: nova.launch @kernels::@k0(%arg0)
// CHECK-NEXT: nova.launch @kernels::@k1(%arg1)
// CHECK-NEXT: nova.launch @kernels::@k0(%arg1)
// CHECK-NEXT: nova.launch @kernels::@k0(%arg0)
// CHECK: module @kernels
// CHECK: func.func @k0
// CHECK: func.func @k1
// CHECK-NOT: func.func @k2
// CHECK-NOT: func.func @k3
// CHECK-NOT: nova.rematerialized
func.func @step(%a: memref<4xf32>, %b: memref<4xf32>) {
  nova.launch @kernels::@k0(%a) : memref<4xf32>
  nova.launch @kernels::@k1(%b) : memref<4xf32>
  nova.launch @kernels::@k2(%b) : memref<4xf32>
  nova.launch @kernels::@k3(%a) : memref<4xf32>
  return
}
module @kernels {
  func.func @k0(%wg: index, %x: memref<4xf32>) {
    %c = arith.constant 1.0 : f32
    linalg.fill ins(%c : f32) outs(%x : memref<4xf32>)
    return
  }
  func.func @k1(%wg: index, %x: memref<4xf32>) {
    %c = arith.constant 2.0 : f32
    linalg.fill ins(%c : f32) outs(%x : memref<4xf32>)
    return
  }
  func.func @k2(%wg: index, %x: memref<4xf32>) {
    %c = arith.constant 1.0 : f32
    linalg.fill ins(%c : f32) outs(%x : memref<4xf32>)
    return
  }
  func.func @k3(%wg: index, %x: memref<4xf32>) {
    %c = arith.constant 1.0 : f32
    linalg.fill {nova.rematerialized} ins(%c : f32) outs(%x : memref<4xf32>)
    return
  }
}
