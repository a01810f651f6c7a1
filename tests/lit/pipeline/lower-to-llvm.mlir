// The whole CPU pipeline on a small MLP: nothing but the LLVM dialect is left,
// and the step has a C interface taking one descriptor per tensor.
// RUN: nova-opt %s -nova-lower-to-llvm -verify-each | FileCheck %s

// CHECK-NOT: nova.
// CHECK-NOT: linalg.
// CHECK-NOT: tensor.
// CHECK-LABEL: llvm.func @mlp
// CHECK-LABEL: llvm.func @_mlir_ciface_mlp(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %b: tensor<3xf32>) -> tensor<4x3xf32> {
  %0 = nova.matmul %x, %w : tensor<4x8xf32>, tensor<8x3xf32>
  %1 = nova.broadcast %b : tensor<3xf32> -> tensor<4x3xf32>
  %2 = nova.add %0, %1 : tensor<4x3xf32>, tensor<4x3xf32>
  %3 = nova.gelu %2 : tensor<4x3xf32>
  return %3 : tensor<4x3xf32>
}
