// A step that allows bf16 matmuls (nova.matmul_precision): its f32 matmul
// kernel becomes the mma.sync kernel with tf32 operands read in place,
// configured by the GPU configurator (mma_sync_matmul, blocks along x,
// threads and dynamic shared memory recorded for the launch plan); the
// fill before it is dropped: the kernel writes every element of C.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @mm
// CHECK-NOT: @kernels::@k0_0
// CHECK: nova.launch @kernels::@k0_1(
// CHECK-NOT: func.func @k0_0(
// CHECK: func.func @k0_1({{.*}}nova.gpu_block_threads = [[T:[0-9]+]] : i64, nova.gpu_operand = "tf32", nova.gpu_shared_bytes = [[S:[0-9]+]] : i64
// CHECK-SAME: "generated as the mma.sync kernel over {{[0-9]+}} blocks (f32 operands as tf32
// CHECK-SAME: #nova.lowering_config<mma_sync_matmul, workgroups = {{[0-9]+}}, tile = [{{[0-9]+}}, {{[0-9]+}}], cache_tile = [{{[0-9]+}}, {{[0-9]+}}, 1]

// GPU: gpu.func @nova_k0_1(%[[C:.*]]: memref<128x64xf32>, %[[A:.*]]: memref<128x32xf32>, %[[B:.*]]: memref<32x64xf32>) kernel
// GPU-DAG: memref.reinterpret_cast %[[A]] to offset: [0], sizes: [128, 32], strides: [32, 1]
// GPU-DAG: memref.reinterpret_cast %[[B]] to offset: [0], sizes: [32, 64], strides: [64, 1]
// GPU-DAG: memref.reinterpret_cast %[[C]] to offset: [0], sizes: [128, 64], strides: [64, 1]
// GPU: gpu.block_id x
// GPU: nvgpu.device_async_copy
// GPU: nvgpu.mma.sync{{.*}}tf32Enabled
// GPU: gpu.return
module attributes {nova.matmul_precision = "bf16"} {
  func.func @mm(%x: tensor<128x32xf32>, %w: tensor<32x64xf32>) -> tensor<128x64xf32> {
    %0 = nova.matmul %x, %w : tensor<128x32xf32>, tensor<32x64xf32>
    return %0 : tensor<128x64xf32>
  }
}
