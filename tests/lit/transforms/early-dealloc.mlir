// RUN: nova-opt %s -nova-early-dealloc -verify-each | FileCheck %s

// %a's last use (through a subview, inside a loop) is the scf.for; %b's is
// the first copy. Each dealloc moves right after its buffer's last use.
// CHECK-LABEL: func @step
// CHECK: %[[A:.*]] = memref.alloc
// CHECK: %[[B:.*]] = memref.alloc
// CHECK: memref.copy %[[B]]
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK: scf.for
// CHECK: }
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: memref.copy %arg0, %arg1
// CHECK-NEXT: return
func.func @step(%arg0: memref<8xf32>, %arg1: memref<8xf32>) {
  %a = memref.alloc() : memref<8xf32>
  %b = memref.alloc() : memref<8xf32>
  memref.copy %b, %a : memref<8xf32> to memref<8xf32>
  %v = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %v[%i] : memref<4xf32, strided<[1]>>
    memref.store %x, %arg1[%i] : memref<8xf32>
  }
  memref.copy %arg0, %arg1 : memref<8xf32> to memref<8xf32>
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %b : memref<8xf32>
  return
}
