// RUN: nova-opt %s | FileCheck %s
// Round trip through the generic form too.
// RUN: nova-opt %s --mlir-print-op-generic | nova-opt | FileCheck %s

// CHECK-LABEL: func @elementwise
func.func @elementwise(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) -> tensor<4x3xf32> {
  // CHECK: nova.add %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4x3xf32>
  %0 = nova.add %a, %b : tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK: nova.sub
  %1 = nova.sub %0, %b : tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK: nova.mul
  %2 = nova.mul %1, %b : tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK: nova.div
  %3 = nova.div %2, %b : tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK: nova.max
  %4 = nova.max %3, %b : tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK: nova.neg
  %5 = nova.neg %4 : tensor<4x3xf32>
  // CHECK: nova.exp
  %6 = nova.exp %5 : tensor<4x3xf32>
  // CHECK: nova.log
  %7 = nova.log %6 : tensor<4x3xf32>
  // CHECK: nova.tanh
  %8 = nova.tanh %7 : tensor<4x3xf32>
  // CHECK: nova.sqrt
  %9 = nova.sqrt %8 : tensor<4x3xf32>
  // CHECK: nova.rsqrt
  %10 = nova.rsqrt %9 : tensor<4x3xf32>
  // CHECK: nova.relu
  %11 = nova.relu %10 : tensor<4x3xf32>
  // CHECK: nova.gelu %{{.*}} {approximate = false} : tensor<4x3xf32>
  %12 = nova.gelu %11 {approximate = false} : tensor<4x3xf32>
  // CHECK: nova.gelu %{{.*}} : tensor<4x3xf32>
  %13 = nova.gelu %12 : tensor<4x3xf32>
  return %13 : tensor<4x3xf32>
}

// CHECK-LABEL: func @structured
func.func @structured(%x: tensor<2x4x8xf32>, %w: tensor<2x8x5xf32>, %v: tensor<5xf32>)
    -> (tensor<2x4x5xf32>, tensor<2x5x4xf32>, tensor<40xf32>, tensor<2x5xf32>, tensor<2x1x5xf32>, tensor<2x4x5xf32>) {
  // CHECK: nova.matmul %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<2x8x5xf32>
  %0 = nova.matmul %x, %w : tensor<2x4x8xf32>, tensor<2x8x5xf32>
  // CHECK: nova.transpose %{{.*}} {permutation = array<i64: 0, 2, 1>} : tensor<2x4x5xf32>
  %1 = nova.transpose %0 {permutation = array<i64: 0, 2, 1>} : tensor<2x4x5xf32>
  // CHECK: nova.reshape %{{.*}} : tensor<2x4x5xf32> -> tensor<40xf32>
  %2 = nova.reshape %0 : tensor<2x4x5xf32> -> tensor<40xf32>
  // CHECK: nova.reduce_sum %{{.*}} {axes = array<i64: 1>} : tensor<2x4x5xf32>
  %3 = nova.reduce_sum %0 {axes = array<i64: 1>} : tensor<2x4x5xf32>
  // CHECK: nova.reduce_max %{{.*}} {axes = array<i64: 1>, keep_dims = true}
  %4 = nova.reduce_max %0 {axes = array<i64: 1>, keep_dims = true} : tensor<2x4x5xf32>
  // CHECK: nova.reduce_mean
  %5 = nova.reduce_mean %0 {axes = array<i64: 0, 1, 2>} : tensor<2x4x5xf32>
  // CHECK: nova.broadcast %{{.*}} : tensor<5xf32> -> tensor<2x4x5xf32>
  %6 = nova.broadcast %v : tensor<5xf32> -> tensor<2x4x5xf32>
  // CHECK: nova.softmax %{{.*}} {axis = 2 : i64} : tensor<2x4x5xf32>
  %7 = nova.softmax %6 {axis = 2 : i64} : tensor<2x4x5xf32>
  // CHECK: nova.constant 5.000000e-01 : tensor<2x4x5xf32>
  %8 = nova.constant 0.5 : tensor<2x4x5xf32>
  %9 = nova.add %7, %8 : tensor<2x4x5xf32>, tensor<2x4x5xf32>
  return %0, %1, %2, %3, %4, %9 : tensor<2x4x5xf32>, tensor<2x5x4xf32>, tensor<40xf32>, tensor<2x5xf32>, tensor<2x1x5xf32>, tensor<2x4x5xf32>
}

// CHECK-LABEL: func @transposed_matmul
func.func @transposed_matmul(%a: tensor<8x4xf64>, %b: tensor<5x8xf64>) -> tensor<4x5xf64> {
  // CHECK: nova.matmul %{{.*}}, %{{.*}} {transpose_a = true, transpose_b = true} : tensor<8x4xf64>, tensor<5x8xf64>
  %0 = nova.matmul %a, %b {transpose_a = true, transpose_b = true} : tensor<8x4xf64>, tensor<5x8xf64>
  return %0 : tensor<4x5xf64>
}

// CHECK-LABEL: func @transformer_ops
func.func @transformer_ops(%t: tensor<7x4xf32>, %i: tensor<2x3xi32>, %x: tensor<2x3x4xf32>)
    -> (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<3x3xf32>, tensor<2x3x2xf32>, tensor<2x3x6xf32>) {
  // CHECK: nova.gather %{{.*}}[%{{.*}}] : tensor<7x4xf32>, tensor<2x3xi32>
  %0 = nova.gather %t[%i] : tensor<7x4xf32>, tensor<2x3xi32>
  // CHECK: nova.scatter_add %{{.*}}, %{{.*}} : tensor<2x3xi32>, tensor<2x3x4xf32> -> tensor<7x4xf32>
  %1 = nova.scatter_add %i, %x : tensor<2x3xi32>, tensor<2x3x4xf32> -> tensor<7x4xf32>
  // CHECK: nova.causal_mask : tensor<3x3xf32>
  %2 = nova.causal_mask : tensor<3x3xf32>
  // CHECK: nova.slice %{{.*}} {offsets = array<i64: 0, 0, 2>, sizes = array<i64: 2, 3, 2>} : tensor<2x3x4xf32>
  %3 = nova.slice %x {offsets = array<i64: 0, 0, 2>, sizes = array<i64: 2, 3, 2>} : tensor<2x3x4xf32>
  // CHECK: nova.pad %{{.*}} {high = array<i64: 0, 0, 1>, low = array<i64: 0, 0, 1>} : tensor<2x3x4xf32>
  %4 = nova.pad %x {low = array<i64: 0, 0, 1>, high = array<i64: 0, 0, 1>} : tensor<2x3x4xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<3x3xf32>, tensor<2x3x2xf32>, tensor<2x3x6xf32>
}

// CHECK-LABEL: func @dropout
// CHECK: nova.dropout %{{.*}}, %{{.*}} {rate = 1.000000e-01 : f64, stream = 3 : i64} : tensor<4x5xf32>, tensor<i64>
func.func @dropout(%x: tensor<4x5xf32>, %s: tensor<i64>) -> tensor<4x5xf32> {
  %0 = nova.dropout %x, %s {rate = 0.1 : f64, stream = 3 : i64} : tensor<4x5xf32>, tensor<i64>
  return %0 : tensor<4x5xf32>
}

// The per-row cross-entropy, its gradient and their kernel op (on tensors
// and on buffers).
// CHECK-LABEL: func @cross_entropy
// CHECK: %[[L:.*]] = nova.cross_entropy %{{.*}}, %{{.*}} : tensor<2x3x5xf32>, tensor<2x3xi64>
// CHECK: nova.cross_entropy_grad %{{.*}}, %{{.*}}, %[[L]] : tensor<2x3x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>
// CHECK: nova.cross_entropy_kernel ins(%{{.*}}, %{{.*}} : tensor<2x3x5xf32>, tensor<2x3xi64>) outs(%{{.*}} : tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: nova.cross_entropy_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<6x5xf32>, memref<6xi32>, memref<6xf32>) outs(%{{.*}} : memref<6x5xf32>) {backward}
func.func @cross_entropy(%x: tensor<2x3x5xf32>, %y: tensor<2x3xi64>, %e: tensor<2x3xf32>,
                         %bx: memref<6x5xf32>, %by: memref<6xi32>, %bg: memref<6xf32>, %bo: memref<6x5xf32>)
    -> (tensor<2x3x5xf32>, tensor<2x3xf32>) {
  %0 = nova.cross_entropy %x, %y : tensor<2x3x5xf32>, tensor<2x3xi64>
  %1 = nova.cross_entropy_grad %x, %y, %0 : tensor<2x3x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>
  %2 = nova.cross_entropy_kernel ins(%x, %y : tensor<2x3x5xf32>, tensor<2x3xi64>) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  nova.cross_entropy_kernel ins(%bx, %by, %bg : memref<6x5xf32>, memref<6xi32>, memref<6xf32>) outs(%bo : memref<6x5xf32>) {backward}
  return %1, %2 : tensor<2x3x5xf32>, tensor<2x3xf32>
}

// A launch plan: the lowering config and nova.launch print and parse back.
// CHECK-LABEL: func @plan
// CHECK: nova.launch @kernels::@k0(%{{.*}}, %{{.*}}) : memref<4xf32>, memref<4xf32>
// CHECK: func.func @k0(%{{.*}}: index, %{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 2, tile = [2], register_tile = []>}
// CHECK: func.func @k1{{.*}}#nova.lowering_config<matmul, workgroups = 1, tile = [6, 32], register_tile = [6, 32]>
// CHECK: func.func @k2{{.*}}#nova.lowering_config<serial, workgroups = 1, tile = [], register_tile = []>
module {
  func.func @plan(%a: memref<4xf32>, %b: memref<4xf32>) {
    nova.launch @kernels::@k0(%a, %b) : memref<4xf32>, memref<4xf32>
    return
  }
  module @kernels {
    func.func @k0(%wg: index, %a: memref<4xf32>, %b: memref<4xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 2, tile = [2], register_tile = []>} {
      return
    }
    func.func @k1(%wg: index) attributes {nova.lowering_config = #nova.lowering_config<matmul, workgroups = 1, tile = [6, 32], register_tile = [6, 32]>} {
      return
    }
    func.func @k2(%wg: index) attributes {nova.lowering_config = #nova.lowering_config<serial, workgroups = 1, tile = [], register_tile = []>} {
      return
    }
  }
}
