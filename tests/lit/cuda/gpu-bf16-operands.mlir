// With bf16 matmuls asked for (nova.matmul_precision = "bf16") a GPU
// product reads bf16 copies of its f32 operands (nova-gpu-bf16-operands,
// before outlining): each operand rounded (arith.truncf) into a new
// row-major bf16 buffer, the two copies one launch side by side, the
// product's body widening them (arith.extf) for its f32 sums, planned as a
// bf16 tensor-core kernel. The product's result and its ReLU stay f32.
// RUN: env NOVA_TARGET=sm_80 nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s

// CHECK-LABEL: func.func @linear
// CHECK-DAG: %[[LHS:.*]] = memref.alloc() {{.*}} : memref<64x32xbf16>
// CHECK-DAG: %[[RHS:.*]] = memref.alloc() {{.*}} : memref<32x48xbf16>
// CHECK: nova.launch @kernels::@[[COPIES:k[0-9]+_side[0-9]+]](%arg0, %[[LHS]], %arg1, %[[RHS]])
// CHECK-NEXT: nova.launch @kernels::@[[MM:k[0-9_]+]](%{{.*}}, %[[LHS]], %[[RHS]],
// CHECK: func.func @[[MM]](
// CHECK-SAME: nova.gpu_operand = "bf16"
// CHECK-SAME: #nova.lowering_config<mma_sync_matmul
// CHECK: ins(%{{.*}}, %{{.*}} : memref<64x32xbf16>, memref<32x48xbf16>) outs(%{{.*}} : memref<64x48xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[C:.*]]: f32):
// CHECK-NEXT: %[[WA:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: %[[WB:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[WA]], %[[WB]] : f32
// CHECK-NEXT: arith.addf %[[C]], %[[P]] : f32
// CHECK: func.func @[[COPIES]](
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: arith.truncf %{{.*}} : f32 to bf16
module attributes {nova.matmul_precision = "bf16"} {
  func.func @linear(%x: tensor<64x32xf32>, %w: tensor<32x48xf32>) -> tensor<64x48xf32> {
    %y = nova.matmul %x, %w : tensor<64x32xf32>, tensor<32x48xf32>
    %r = nova.relu %y : tensor<64x48xf32>
    return %r : tensor<64x48xf32>
  }
}
