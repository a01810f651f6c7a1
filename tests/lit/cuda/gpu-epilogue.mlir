// A tensor-core matmul followed by an elementwise op of its product stays
// one kernel: nova-gpu-threads marks it nova.gpu_epilogue = [result
// argument, arguments of the op's other inputs] and the mma.sync (or
// wgmma) kernel runs the op's body on its accumulators in registers and
// writes only the op's result: one launch, and the product is never
// stored, so its buffer goes (from the launch, the kernel and the plan:
// dropUnstoredProducts). The op's other inputs are read at the result's element: a
// column's value (a bias), the element's own (a residual), a row's (a
// softmax's sums), or, for an op computed in place, what its result held.
// Where another op reads the product too (%3, its tanh), the bias add stays
// a kernel of its own.
// RUN: env NOVA_TARGET=sm_80 nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s
// RUN: env NOVA_TARGET=sm_80 nova-opt %s -nova-lower-to-kernels -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @linear
// CHECK-NEXT: nova.launch @kernels::@[[K:k[0-9]+]](%arg0, %arg1, %arg2, %arg3)
// CHECK-NEXT: return
// CHECK-LABEL: func.func @product_too
// CHECK: nova.launch @kernels::@[[MM:k[0-9]+_1]](
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+_side[0-9]+}}(
// The residual add of the product's rows split as [2, 32] fuses with the
// bias add (nova-fuse-elementwise) into one op, which the kernel runs.
// CHECK-LABEL: func.func @residual
// CHECK-NEXT: nova.launch @kernels::@[[RES:k[0-9]+]](%arg0, %arg1, %arg3, %arg2, %arg4)
// CHECK-NEXT: return
// CHECK-LABEL: func.func @in_place
// CHECK: nova.launch @kernels::@[[IN:k[0-9]+]](%arg0, %arg1, %[[SUMS:[a-z_0-9]+]], %[[EXP:[a-z_0-9]+]])
// CHECK: return
// CHECK: func.func @[[K]]({{.*}}nova.gpu_epilogue = array<i64: 3, 2>
// CHECK-SAME: "generated as the mma.sync kernel over 4 blocks (f32 operands as tf32, as the step's matmul precision allows), the elementwise op after it fused (run on the accumulators in registers)"
// CHECK: func.func @[[MM]](
// CHECK-NOT: nova.gpu_epilogue
// CHECK-SAME: nova.lowering_config
// CHECK: func.func @[[RES]]({{.*}}nova.gpu_epilogue = array<i64: 4, 2, 3>
// CHECK: func.func @[[IN]]({{.*}}nova.gpu_epilogue = array<i64: 3, 2, 3>

// The bias kernel reads the bias (argument 2) in pairs of columns and
// writes the result (argument 3).
// GPU: gpu.func @nova_[[K:k[0-9]+]](%arg0: memref<64x32xf32>, %arg1: memref<32x48xf32>, %arg2: memref<48xf32>, %arg3: memref<64x48xf32>) kernel
// GPU-DAG: %[[OUT:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [64, 48], strides: [48, 1]
// GPU-DAG: %[[BIAS:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [48], strides: [1]
// GPU: nvgpu.mma.sync
// GPU: vector.load %[[BIAS]][%{{.*}}] : memref<48xf32>, vector<2xf32>
// GPU: vector.store %{{.*}}, %[[OUT]][%{{.*}}, %{{.*}}] : memref<64x48xf32>, vector<2xf32>
// GPU: gpu.return
// The residual kernel: the [2, 32, 48] buffers read and written as 64 x 48.
// GPU: gpu.func @nova_{{k[0-9]+}}(%arg0: memref<2x32x32xf32>, %arg1: memref<32x48xf32>, %arg2: memref<2x32x48xf32>, %arg3: memref<48xf32>, %arg4: memref<2x32x48xf32>) kernel
// GPU-DAG: %[[OUT:.*]] = memref.reinterpret_cast %arg4 to offset: [0], sizes: [64, 48], strides: [48, 1]
// GPU-DAG: %[[RESIDUAL:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [64, 48], strides: [48, 1]
// GPU-DAG: %[[BIAS:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [48], strides: [1]
// GPU: nvgpu.mma.sync
// GPU: vector.load %[[RESIDUAL]][%[[R:.*]], %[[C:.*]]] : memref<64x48xf32>, vector<2xf32>
// GPU: vector.load %[[BIAS]][%[[C]]] : memref<48xf32>, vector<2xf32>
// GPU: vector.store %{{.*}}, %[[OUT]][%[[R]], %[[C]]] : memref<64x48xf32>, vector<2xf32>
// GPU: gpu.return
// The in-place kernel: the row's sum (64 x 1 as 64) and the element the
// result held, then the quotient's product, stored over it.
// GPU: gpu.func @nova_{{k[0-9]+}}(%arg0: memref<64x32xf32>, %arg1: memref<32x48xf32>, %arg2: memref<64x1xf32>, %arg3: memref<64x48xf32>) kernel
// GPU-DAG: %[[OUT:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [64, 48], strides: [48, 1]
// GPU-DAG: %[[SUMS:.*]] = memref.reinterpret_cast %arg2 to offset: [0], sizes: [64], strides: [1]
// GPU-DAG: %[[HELD:.*]] = memref.reinterpret_cast %arg3 to offset: [0], sizes: [64, 48], strides: [48, 1]
// GPU: nvgpu.mma.sync
// GPU: %[[SUM:.*]] = memref.load %[[SUMS]][%[[R:.*]]] : memref<64xf32>
// GPU: vector.load %[[HELD]][%[[R]], %[[C:.*]]] : memref<64x48xf32>, vector<2xf32>
// GPU: arith.divf %{{.*}}, %[[SUM]] : f32
// GPU: vector.store %{{.*}}, %[[OUT]][%[[R]], %[[C]]] : memref<64x48xf32>, vector<2xf32>
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
  func.func @residual(%x: tensor<2x32x32xf32>, %w: tensor<32x48xf32>, %b: tensor<48xf32>, %r: tensor<2x32x48xf32>) -> tensor<2x32x48xf32> {
    %x2 = nova.reshape %x : tensor<2x32x32xf32> -> tensor<64x32xf32>
    %0 = nova.matmul %x2, %w : tensor<64x32xf32>, tensor<32x48xf32>
    %1 = nova.broadcast %b : tensor<48xf32> -> tensor<64x48xf32>
    %2 = nova.add %0, %1 : tensor<64x48xf32>, tensor<64x48xf32>
    %3 = nova.reshape %2 : tensor<64x48xf32> -> tensor<2x32x48xf32>
    %4 = nova.add %r, %3 : tensor<2x32x48xf32>, tensor<2x32x48xf32>
    return %4 : tensor<2x32x48xf32>
  }
  func.func @in_place(%x: tensor<64x32xf32>, %w: tensor<32x48xf32>, %a: tensor<64x48xf32>) -> tensor<64x48xf32> {
    %t = nova.softmax %a {axis = 1 : i64} : tensor<64x48xf32>
    %0 = nova.matmul %x, %w : tensor<64x32xf32>, tensor<32x48xf32>
    %1 = nova.mul %0, %t : tensor<64x48xf32>, tensor<64x48xf32>
    %2 = nova.tanh %1 : tensor<64x48xf32>
    %3 = nova.softmax %2 {axis = 1 : i64} : tensor<64x48xf32>
    return %3 : tensor<64x48xf32>
  }
}
