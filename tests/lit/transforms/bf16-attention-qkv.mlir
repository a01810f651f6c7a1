// RUN: nova-opt %s -nova-lower-to-linalg -canonicalize -nova-bf16-attention-qkv="dot-bf16=true vector-bits=512" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-linalg -canonicalize -nova-bf16-attention-qkv="vector-bits=512" -verify-each | FileCheck %s --check-prefix=OFF
// RUN: nova-opt %s -nova-lower-to-linalg -canonicalize -nova-bf16-attention-qkv="dot-bf16=true vector-bits=256" -verify-each | FileCheck %s --check-prefix=OFF

// With bf16 matmuls and AVX512-BF16 dot products on 512-bit vectors, a qkv
// that only attention reads (the forward and the gradient, through a
// reshape) is read as its bf16 copy: rounded (arith.truncf) right after the
// bias add that makes it, which fuses into it. nova-vectorize-attention
// rounds q, k and v the same way as it packs them (heads of 64: a multiple
// of 32). A qkv a product also reads (%qkv2) stays f32, and so does one of
// heads of 16 (%qkv3: the f32 kernel, which reads f32). Without dot-bf16,
// or on 256-bit vectors, nothing changes.
// CHECK-LABEL: func.func @qkv
// CHECK: %[[COPY:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<64x192xf32>) outs(%{{.*}} : tensor<64x192xbf16>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.truncf %{{.*}} : f32 to bf16
// CHECK: %[[Q1:.*]] = tensor.expand_shape %[[COPY]] {{.*}} : tensor<64x192xbf16> into tensor<2x32x192xbf16>
// CHECK: %[[Q2:.*]] = tensor.expand_shape %[[COPY]] {{.*}} : tensor<64x192xbf16> into tensor<2x32x192xbf16>
// CHECK: nova.attention_kernel ins(%[[Q2]] : tensor<2x32x192xbf16>)
// CHECK: nova.attention_kernel ins(%[[Q1]], %{{.*}} : tensor<2x32x192xbf16>, tensor<2x32x64xf32>) {{.*}}backward
// CHECK: nova.attention_kernel ins(%{{.*}} : tensor<2x32x192xf32>)
// CHECK: nova.attention_kernel ins(%{{.*}} : tensor<2x32x48xf32>)
// CHECK-NOT: xbf16
// CHECK: return
// OFF-NOT: xbf16
module attributes {nova.matmul_precision = "bf16"} {
  func.func @qkv(%x: tensor<64x32xf32>, %w: tensor<32x192xf32>, %b: tensor<192xf32>, %dy: tensor<2x32x64xf32>,
                 %w3: tensor<32x48xf32>)
      -> (tensor<2x32x64xf32>, tensor<2x32x192xf32>, tensor<64x192xf32>, tensor<2x32x16xf32>) {
    %p = nova.matmul %x, %w : tensor<64x32xf32>, tensor<32x192xf32>
    %bb = nova.broadcast %b : tensor<192xf32> -> tensor<64x192xf32>
    %pb = nova.add %p, %bb : tensor<64x192xf32>, tensor<64x192xf32>
    %qkv = nova.reshape %pb : tensor<64x192xf32> -> tensor<2x32x192xf32>
    %o = nova.causal_attention %qkv {heads = 1 : i64, scale = 0.125 : f64} : tensor<2x32x192xf32> -> tensor<2x32x64xf32>
    %dqkv = nova.causal_attention_grad %qkv, %dy {heads = 1 : i64, scale = 0.125 : f64} : tensor<2x32x192xf32>, tensor<2x32x64xf32>
    %p2 = nova.matmul %x, %w : tensor<64x32xf32>, tensor<32x192xf32>
    %qkv2 = nova.reshape %p2 : tensor<64x192xf32> -> tensor<2x32x192xf32>
    %o2 = nova.causal_attention %qkv2 {heads = 1 : i64, scale = 0.125 : f64} : tensor<2x32x192xf32> -> tensor<2x32x64xf32>
    %s = nova.add %p2, %p : tensor<64x192xf32>, tensor<64x192xf32>
    %sum = nova.add %o, %o2 : tensor<2x32x64xf32>, tensor<2x32x64xf32>
    %p3 = nova.matmul %x, %w3 : tensor<64x32xf32>, tensor<32x48xf32>
    %qkv3 = nova.reshape %p3 : tensor<64x48xf32> -> tensor<2x32x48xf32>
    %o3 = nova.causal_attention %qkv3 {heads = 1 : i64, scale = 0.25 : f64} : tensor<2x32x48xf32> -> tensor<2x32x16xf32>
    return %sum, %dqkv, %s, %o3 : tensor<2x32x64xf32>, tensor<2x32x192xf32>, tensor<64x192xf32>, tensor<2x32x16xf32>
  }
}
