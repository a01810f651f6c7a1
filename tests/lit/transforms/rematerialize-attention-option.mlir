// nova-rematerialize's `attention` option is the target's choice
// (Target::recomputesAttention: false for CUDA): with it false a fused
// attention's output is kept for its late use, unless the module's
// nova.remat_attention = true (NOVA_REMAT=1) asks for the recomputation.
// RUN: nova-opt %s -nova-rematerialize="min-gap=4 attention=false" -verify-each -split-input-file | FileCheck %s

// CHECK-LABEL: func @kept
// CHECK-NOT: nova.rematerialized
func.func @kept(%qkv: tensor<1x8x12xf32>, %w: tensor<4x4xf32>) -> tensor<8x4xf32> {
  %a = nova.causal_attention %qkv {heads = 2 : i64, scale = 0.5 : f64} : tensor<1x8x12xf32> -> tensor<1x8x4xf32>
  %r = nova.reshape %a : tensor<1x8x4xf32> -> tensor<8x4xf32>
  %p = nova.matmul %r, %w : tensor<8x4xf32>, tensor<4x4xf32>
  %t0 = nova.tanh %p : tensor<8x4xf32>
  %t1 = nova.tanh %t0 : tensor<8x4xf32>
  %t2 = nova.tanh %t1 : tensor<8x4xf32>
  %t3 = nova.tanh %t2 : tensor<8x4xf32>
  %t4 = nova.tanh %t3 : tensor<8x4xf32>
  %r2 = nova.reshape %a : tensor<1x8x4xf32> -> tensor<8x4xf32>
  %g = nova.mul %r2, %t4 : tensor<8x4xf32>, tensor<8x4xf32>
  return %g : tensor<8x4xf32>
}

// -----

// CHECK-LABEL: func @asked
// CHECK: nova.causal_attention %arg0 {{{.*}}nova.rematerialized{{.*}}}
module attributes {nova.remat_attention = true} {
  func.func @asked(%qkv: tensor<1x8x12xf32>, %w: tensor<4x4xf32>) -> tensor<8x4xf32> {
    %a = nova.causal_attention %qkv {heads = 2 : i64, scale = 0.5 : f64} : tensor<1x8x12xf32> -> tensor<1x8x4xf32>
    %r = nova.reshape %a : tensor<1x8x4xf32> -> tensor<8x4xf32>
    %p = nova.matmul %r, %w : tensor<8x4xf32>, tensor<4x4xf32>
    %t0 = nova.tanh %p : tensor<8x4xf32>
    %t1 = nova.tanh %t0 : tensor<8x4xf32>
    %t2 = nova.tanh %t1 : tensor<8x4xf32>
    %t3 = nova.tanh %t2 : tensor<8x4xf32>
    %t4 = nova.tanh %t3 : tensor<8x4xf32>
    %r2 = nova.reshape %a : tensor<1x8x4xf32> -> tensor<8x4xf32>
    %g = nova.mul %r2, %t4 : tensor<8x4xf32>, tensor<8x4xf32>
    return %g : tensor<8x4xf32>
  }
}
