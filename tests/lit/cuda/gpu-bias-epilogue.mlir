// A tensor-core matmul followed by a bias add of its product (a linear
// layer's forward) stays one kernel: nova-gpu-threads marks it
// nova.gpu_bias_epilogue = [bias argument, result argument] and the
// mma.sync (or wgmma) kernel adds the bias to its accumulators in
// registers and writes only the sum: one launch, and the product is never
// stored. Where another op reads the product too (%3, its tanh), the bias
// add stays a kernel of its own.
// RUN: env NOVA_TARGET=sm_80 nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s
// RUN: env NOVA_TARGET=sm_80 nova-opt %s -nova-lower-to-kernels -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @linear
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: nova.launch @kernels::@[[K:k[0-9]+]](%{{.*}}, %arg0, %arg1, %arg2, %arg3)
// CHECK-NEXT: return
// CHECK-LABEL: func.func @product_too
// CHECK: nova.launch @kernels::@[[MM:k[0-9]+_1]](
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+_side[0-9]+}}(
// CHECK: func.func @[[K]]({{.*}}nova.gpu_bias_epilogue = array<i64: 3, 4>
// CHECK-SAME: "generated as the mma.sync kernel over 4 blocks (f32 operands as tf32, as the step's matmul precision allows), its bias add fused (added to the accumulators in registers)"
// CHECK: func.func @[[MM]](
// CHECK-NOT: nova.gpu_bias_epilogue
// CHECK-SAME: nova.lowering_config

// The kernel reads the bias (argument 3) in pairs of columns and writes
// the result (argument 4).
// GPU: gpu.func @nova_[[K:k[0-9]+]](%arg0: memref<64x48xf32>, %arg1: memref<64x32xf32>, %arg2: memref<32x48xf32>, %arg3: memref<48xf32>, %arg4: memref<64x48xf32>) kernel
// GPU-DAG: %[[BIAS:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [48], strides: [1]
// GPU-DAG: %[[OUT:.*]] = memref.reinterpret_cast %arg4 to offset: [0], sizes: [64, 48], strides: [48, 1]
// GPU: nvgpu.mma.sync
// GPU: vector.load %[[BIAS]][%{{.*}}] : memref<48xf32>, vector<2xf32>
// GPU: vector.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}] : memref<64x48xf32>, vector<2xf32>
module attributes {nova.matmul_precision = "tf32"} {
  func.func @linear(%x: tensor<64x32xf32>, %w: tensor<32x48xf32>, %b: tensor<48xf32>) -> tensor<64x48xf32> {
    %0 = nova.matmul %x, %w : tensor<64x32xf32>, tensor<32x48xf32>
    %1 = nova.broadcast %b : tensor<48xf32> -> tensor<64x48xf32>
    %2 = nova.add %0, %1 : tensor<64x48xf32>, tensor<64x48xf32>
    return %2 : tensor<64x48xf32>
  }
  func.func @product_too(%x: tensor<64x32xf32>, %w: tensor<32x48xf32>, %b: tensor<48xf32>) -> (tensor<64x48xf32>, tensor<64x48xf32>) {
    %0 = nova.matmul %x, %w : tensor<64x32xf32>, tensor<32x48xf32>
    %1 = nova.broadcast %b : tensor<48xf32> -> tensor<64x48xf32>
    %2 = nova.add %0, %1 : tensor<64x48xf32>, tensor<64x48xf32>
    %3 = nova.tanh %0 : tensor<64x48xf32>
    return %2, %3 : tensor<64x48xf32>, tensor<64x48xf32>
  }
}
