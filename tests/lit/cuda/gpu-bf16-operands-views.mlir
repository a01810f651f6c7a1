// nova-gpu-bf16-operands looks through the rearrangements between a value
// and the products reading it: a [B, T, d] activation read as [B*T, d]
// (tensor.collapse_shape) is copied as [B, T, d] and the copy reshaped, so
// the rounding fuses into the producer; a forward LayerNorm or attention
// kernel whose result only products read writes it in bf16 itself; a
// weight read transposed (an input gradient's W^T) is copied as it is, the
// transpose a view of the copy in the product's kernel. A step argument
// (%w) is copied right before each product reading it.
// RUN: env NOVA_TARGET=sm_80 nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s

// No f32 LayerNorm, attention or tanh result; no transpose launch; the
// LayerNorm and the first copy of %w side by side, the copies of %w and %dy
// too, before the products reading them.
// CHECK-LABEL: func.func @views
// CHECK-NEXT: %[[N:.*]] = memref.alloc() {{.*}} : memref<2x32x16xbf16>
// CHECK-NEXT: %[[W1:.*]] = memref.alloc() {{.*}} : memref<16x16xbf16>
// CHECK-NEXT: nova.launch @kernels::@[[NORM:k[0-9]+_side[0-9]+]](%arg0, %arg1, %arg2, %[[N]], %arg3, %[[W1]])
// CHECK-NEXT: nova.launch @kernels::@[[MM:k[0-9_]+]](%arg7, %[[N]], %[[W1]])
// CHECK-NEXT: %[[DY:.*]] = memref.alloc() {{.*}} : memref<64x16xbf16>
// CHECK-NEXT: %[[W2:.*]] = memref.alloc() {{.*}} : memref<16x16xbf16>
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+_side[0-9]+}}(%arg4, %[[DY]], %arg3, %[[W2]])
// CHECK-NEXT: nova.launch @kernels::@[[MMT:k[0-9_]+]](%arg8, %[[DY]], %[[W2]])
// CHECK-NEXT: %[[A:.*]] = memref.alloc() {{.*}} : memref<2x32x16xbf16>
// CHECK-NEXT: nova.launch @kernels::@[[ATT:k[0-9]+]](%arg5, %[[A]])
// CHECK-NEXT: %[[W3:.*]] = memref.alloc() {{.*}} : memref<16x16xbf16>
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+}}(%arg3, %[[W3]])
// CHECK-NEXT: nova.launch @kernels::@[[MM]](%arg9, %[[A]], %[[W3]])
// CHECK-NEXT: %[[T:.*]] = memref.alloc() {{.*}} : memref<2x32x16xbf16>
// CHECK-NEXT: %[[V:.*]] = memref.alloc() {{.*}} : memref<16x8xbf16>
// CHECK-NEXT: nova.launch @kernels::@[[TANH:k[0-9]+_side[0-9]+]](%arg0, %[[T]], %arg6, %[[V]])
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9_]+}}(%arg10, %[[T]], %[[V]])
// CHECK-NEXT: return
// CHECK: func.func @[[MMT]](
// CHECK-NEXT: memref.transpose %{{.*}} (d0, d1) -> (d1, d0) : memref<16x16xbf16> to memref<16x16xbf16, strided<[1, 16]>>
// CHECK: func.func @[[ATT]](
// CHECK-NEXT: nova.attention_kernel {{.*}} outs(%{{.*}} : memref<2x32x16xbf16>)
// CHECK: func.func @[[NORM]](
// CHECK-NEXT: nova.layer_norm_kernel {{.*}} outs(%{{.*}} : memref<2x32x16xbf16>)
// CHECK: func.func @[[TANH]](
// CHECK: math.tanh
// CHECK-NEXT: arith.truncf %{{.*}} : f32 to bf16
module attributes {nova.matmul_precision = "bf16"} {
  func.func @views(%x: tensor<2x32x16xf32>, %gamma: tensor<16xf32>, %beta: tensor<16xf32>, %w: tensor<16x16xf32>,
                   %dy: tensor<64x16xf32>, %qkv: tensor<2x32x48xf32>, %v: tensor<16x8xf32>)
      -> (tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x8xf32>) {
    %n = nova.layer_norm %x, %gamma, %beta {eps = 1.0e-5 : f64} : tensor<2x32x16xf32>, tensor<16xf32>, tensor<16xf32>
    %nr = nova.reshape %n : tensor<2x32x16xf32> -> tensor<64x16xf32>
    %a = nova.matmul %nr, %w : tensor<64x16xf32>, tensor<16x16xf32>
    %wt = nova.transpose %w {permutation = array<i64: 1, 0>} : tensor<16x16xf32>
    %b = nova.matmul %dy, %wt : tensor<64x16xf32>, tensor<16x16xf32>
    %att = nova.causal_attention %qkv {heads = 2 : i64, scale = 0.5 : f64} : tensor<2x32x48xf32> -> tensor<2x32x16xf32>
    %ar = nova.reshape %att : tensor<2x32x16xf32> -> tensor<64x16xf32>
    %c = nova.matmul %ar, %w : tensor<64x16xf32>, tensor<16x16xf32>
    %t = nova.tanh %x : tensor<2x32x16xf32>
    %tr = nova.reshape %t : tensor<2x32x16xf32> -> tensor<64x16xf32>
    %d = nova.matmul %tr, %v : tensor<64x16xf32>, tensor<16x8xf32>
    return %a, %b, %c, %d : tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x8xf32>
  }
}
