// tf32 matmuls (nova.matmul_precision = "tf32"): no copies; the tensor
// cores read the f32 operands as tf32.
// RUN: env NOVA_TARGET=sm_80 nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s

// CHECK-LABEL: func.func @linear
// CHECK-NOT: bf16
// CHECK: nova.gpu_operand = "tf32"
// CHECK-NOT: bf16
module attributes {nova.matmul_precision = "tf32"} {
  func.func @linear(%x: tensor<64x32xf32>, %w: tensor<32x48xf32>) -> tensor<64x48xf32> {
    %y = nova.matmul %x, %w : tensor<64x32xf32>, tensor<32x48xf32>
    %r = nova.relu %y : tensor<64x48xf32>
    return %r : tensor<64x48xf32>
  }
}
