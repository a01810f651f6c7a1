// With bf16 matmul precision, a GPU matmul runs on the tensor cores
// (mma.sync m16n8k16 bf16; 64x256 rows and columns of 128-byte K slabs).
// RUN: nova-opt %s -nova-lower-to-kernels -nova-configure-gpu-kernels="target=h200" -verify-each | FileCheck %s
// CHECK: func.func @k0({{.*}}"inputs: 64 x 256 x 128 (batch 1), bf16 operands, NN, on sm_90a
// CHECK-SAME: "instruction: mma.sync.m16n8k16.bf16 (the wgmma kernel is not allowed here
// CHECK-SAME: nova.lowering_config = #nova.lowering_config<mma_sync_matmul, workgroups = {{[0-9]+}}, tile = [{{[0-9]+}}, {{[0-9]+}}], cache_tile = [64, {{[0-9]+}}, 1]
module attributes {nova.matmul_precision = "bf16"} {
  func.func @mm(%x: tensor<64x128xf32>, %w: tensor<128x256xf32>) -> tensor<64x256xf32> {
    %0 = nova.matmul %x, %w : tensor<64x128xf32>, tensor<128x256xf32>
    return %0 : tensor<64x256xf32>
  }
}
