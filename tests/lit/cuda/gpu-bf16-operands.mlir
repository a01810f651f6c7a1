// With bf16 matmuls asked for (nova.matmul_precision = "bf16") a GPU
// product reads bf16 copies of its f32 operands (nova-gpu-bf16-operands, on
// tensors before elementwise fusion): each f32 value a product reads is
// rounded (arith.truncf) once, into a bf16 buffer both products share; the
// tanh that made %t fuses into its rounding, so %t never exists in f32. A
// step argument (%w, %v: weights) is copied right before each product
// reading it (a copy shared by a forward product and a backward one would
// live across the forward's peak), here the tanh's and %w's copies side by
// side, and %v's, made after the first product, moved before it (it
// touches nothing that product does) beside them. Each product's body
// widens its operands (arith.extf) for its f32 sums and is planned as a
// bf16 tensor-core kernel.
// RUN: env NOVA_TARGET=sm_80 nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s

// The step allocates the three copies and nothing else.
// CHECK-LABEL: func.func @shared
// CHECK-NEXT: memref.alloc() {{.*}} : memref<64x32xbf16>
// CHECK-NEXT: memref.alloc() {{.*}} : memref<32x48xbf16>
// CHECK-NEXT: memref.alloc() {{.*}} : memref<32x16xbf16>
// CHECK-NEXT: nova.launch @kernels::@[[COPIES:k[0-9]+_side[0-9]+]](%arg0, %[[T:[a-z_0-9]+]], %arg1, %[[W:[a-z_0-9]+]], %arg2, %[[V:[a-z_0-9]+]])
// CHECK-NEXT: nova.launch @kernels::@[[MM1:k[0-9_]+]](%arg3, %[[T]], %[[W]])
// CHECK-NEXT: nova.launch @kernels::@[[MM2:k[0-9_]+]](%arg4, %[[T]], %[[V]])
// CHECK-NEXT: return
// CHECK: func.func @[[MM1]](
// CHECK-SAME: nova.gpu_operand = "bf16"
// CHECK-SAME: #nova.lowering_config<mma_sync_matmul
// CHECK: ins(%{{.*}}, %{{.*}} : memref<64x32xbf16>, memref<32x48xbf16>) outs(%{{.*}} : memref<64x48xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[C:.*]]: f32):
// CHECK-NEXT: %[[WA:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: %[[WB:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[WA]], %[[WB]] : f32
// CHECK-NEXT: arith.addf %[[C]], %[[P]] : f32
// CHECK: func.func @[[COPIES]](
// CHECK: %[[TANH:.*]] = math.tanh %{{.*}} : f32
// CHECK-NEXT: arith.truncf %[[TANH]] : f32 to bf16
// CHECK: arith.truncf %{{.*}} : f32 to bf16
module attributes {nova.matmul_precision = "bf16"} {
  func.func @shared(%x: tensor<64x32xf32>, %w: tensor<32x48xf32>, %v: tensor<32x16xf32>) -> (tensor<64x48xf32>, tensor<64x16xf32>) {
    %t = nova.tanh %x : tensor<64x32xf32>
    %a = nova.matmul %t, %w : tensor<64x32xf32>, tensor<32x48xf32>
    %b = nova.matmul %t, %v : tensor<64x32xf32>, tensor<32x16xf32>
    return %a, %b : tensor<64x48xf32>, tensor<64x16xf32>
  }
}
