// RUN: nova-opt %s -nova-rematerialize=min-gap=4 -verify-each -split-input-file | FileCheck %s

// A GELU's output is used right away and again 5 ops later; its input is
// an argument (live throughout): the late use reads a GELU recomputed just
// before it, and the original dies at its first use.
// The decision, recorded on the module for NOVA_EXPLAIN:
// CHECK: module attributes {nova.remat_decisions = [{bytes = 48 : i64, flops = 0 : i64, what = "nova.gelu 4x3 f32: not kept across 5 ops, recomputed before nova.mul"}]}
// CHECK-LABEL: func @gelu
// CHECK: %[[G:.*]] = nova.gelu %[[X:[^ ]*]] : tensor<4x3xf32>
// CHECK: nova.exp %[[G]]
// CHECK-COUNT-4: nova.tanh
// CHECK: %[[R:.*]] = nova.gelu %[[X]] {nova.rematerialized} : tensor<4x3xf32>
// CHECK-NEXT: nova.mul %{{.*}}, %[[R]]
// CHECK-NEXT: nova.add %{{.*}}, %[[R]]
func.func @gelu(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %g = nova.gelu %x : tensor<4x3xf32>
  %a = nova.exp %g : tensor<4x3xf32>
  %b = nova.tanh %a : tensor<4x3xf32>
  %c = nova.tanh %b : tensor<4x3xf32>
  %d = nova.tanh %c : tensor<4x3xf32>
  %e = nova.tanh %d : tensor<4x3xf32>
  %f = nova.mul %e, %g : tensor<4x3xf32>, tensor<4x3xf32>
  %h = nova.add %f, %g : tensor<4x3xf32>, tensor<4x3xf32>
  return %h : tensor<4x3xf32>
}

// -----

// A LayerNorm's input %y (a matmul's: not recomputed itself) is used after
// the gap anyway (as the LayerNorm gradient would): the normalized value is
// recomputed there.
// CHECK-LABEL: func @layer_norm
// CHECK: nova.layer_norm
// CHECK-COUNT-4: nova.tanh
// CHECK: nova.layer_norm {{.*}}nova.rematerialized
// CHECK-NEXT: nova.mul
func.func @layer_norm(%x: tensor<4x3xf32>, %w: tensor<3x3xf32>, %gamma: tensor<3xf32>, %beta: tensor<3xf32>) -> tensor<4x3xf32> {
  %y = nova.matmul %x, %w : tensor<4x3xf32>, tensor<3x3xf32>
  %n = nova.layer_norm %y, %gamma, %beta {eps = 1.0e-5 : f64} : tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>
  %a = nova.tanh %n : tensor<4x3xf32>
  %b = nova.tanh %a : tensor<4x3xf32>
  %c = nova.tanh %b : tensor<4x3xf32>
  %d = nova.tanh %c : tensor<4x3xf32>
  %e = nova.mul %d, %n : tensor<4x3xf32>, tensor<4x3xf32>
  %f = nova.add %e, %y : tensor<4x3xf32>, tensor<4x3xf32>
  return %f : tensor<4x3xf32>
}

// -----

// The GELU's input %y dies at the GELU and is a matmul's (not cheap):
// recomputing the GELU late would keep %y alive instead (no gain), so
// nothing changes. A gap shorter than min-gap is left alone too.
// CHECK-LABEL: func @operand_dead
// CHECK-NOT: nova.rematerialized
// CHECK-LABEL: func @short_gap
// CHECK-NOT: nova.rematerialized
// CHECK-LABEL: func @chain
func.func @operand_dead(%x: tensor<4x3xf32>, %w: tensor<3x3xf32>) -> tensor<4x3xf32> {
  %y = nova.matmul %x, %w : tensor<4x3xf32>, tensor<3x3xf32>
  %g = nova.gelu %y : tensor<4x3xf32>
  %a = nova.exp %g : tensor<4x3xf32>
  %b = nova.tanh %a : tensor<4x3xf32>
  %c = nova.tanh %b : tensor<4x3xf32>
  %d = nova.tanh %c : tensor<4x3xf32>
  %e = nova.tanh %d : tensor<4x3xf32>
  %f = nova.mul %e, %g : tensor<4x3xf32>, tensor<4x3xf32>
  return %f : tensor<4x3xf32>
}
func.func @short_gap(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %g = nova.gelu %x : tensor<4x3xf32>
  %a = nova.exp %g : tensor<4x3xf32>
  %b = nova.tanh %a : tensor<4x3xf32>
  %f = nova.mul %b, %g : tensor<4x3xf32>, tensor<4x3xf32>
  return %f : tensor<4x3xf32>
}

// The value read late is a reshape of a GELU of an exp of an argument
// (the GPT's GELU output flattened for the next matmul): the three are
// recomputed together, in order, and only the argument is read.
// CHECK: %[[E:.*]] = nova.exp %[[X:[^ ]*]] {nova.rematerialized}
// CHECK-NEXT: %[[G:.*]] = nova.gelu %[[E]] {nova.rematerialized}
// CHECK-NEXT: %[[R:.*]] = nova.reshape %[[G]] {nova.rematerialized}
// CHECK-NEXT: nova.mul %{{.*}}, %[[R]]
func.func @chain(%x: tensor<4x3xf32>) -> tensor<12xf32> {
  %y = nova.exp %x : tensor<4x3xf32>
  %g = nova.gelu %y : tensor<4x3xf32>
  %r = nova.reshape %g : tensor<4x3xf32> -> tensor<12xf32>
  %a = nova.exp %r : tensor<12xf32>
  %b = nova.tanh %a : tensor<12xf32>
  %c = nova.tanh %b : tensor<12xf32>
  %d = nova.tanh %c : tensor<12xf32>
  %e = nova.tanh %d : tensor<12xf32>
  %f = nova.mul %e, %r : tensor<12xf32>, tensor<12xf32>
  return %f : tensor<12xf32>
}

// -----

// NOVA_REMAT=0 (the module says so): left alone.
// CHECK-LABEL: func @off
// CHECK-NOT: nova.rematerialized
module attributes {nova.remat = 0 : i64} {
  func.func @off(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %g = nova.gelu %x : tensor<4x3xf32>
    %a = nova.exp %g : tensor<4x3xf32>
    %b = nova.tanh %a : tensor<4x3xf32>
    %c = nova.tanh %b : tensor<4x3xf32>
    %d = nova.tanh %c : tensor<4x3xf32>
    %e = nova.tanh %d : tensor<4x3xf32>
    %f = nova.mul %e, %g : tensor<4x3xf32>, tensor<4x3xf32>
    return %f : tensor<4x3xf32>
  }
}

// -----

// A fused attention's output, used by the output projection and again by
// its weight gradient far later, is recomputed from qkv (which the
// attention gradient reads there anyway); with nova.remat_attention =
// false (NOVA_REMAT=cheap) it is kept.
// CHECK-LABEL: func @attention
// CHECK: %[[A:.*]] = nova.causal_attention %arg0
// CHECK: nova.matmul %{{.*}}, %arg1
// CHECK: %[[B:.*]] = nova.causal_attention %arg0 {{{.*}}nova.rematerialized{{.*}}}
// CHECK: nova.reshape %[[B]]
func.func @attention(%qkv: tensor<1x8x12xf32>, %w: tensor<4x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
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
  %s = nova.add %g, %p : tensor<8x4xf32>, tensor<8x4xf32>
  return %s, %r : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// CHECK-LABEL: func @attention_kept
// CHECK-NOT: nova.rematerialized
module attributes {nova.remat_attention = false} {
  func.func @attention_kept(%qkv: tensor<1x8x12xf32>, %w: tensor<4x4xf32>) -> tensor<8x4xf32> {
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

// -----

// A value the gradient of its maximum compares with that maximum (the
// reduce_max VJP's greater(broadcast(max(v)), v)) is never recomputed: a
// copy made in another kernel may round an element an ulp below its own
// maximum, which then loses its gradient (graph_fuzz train 210). The same
// value without that comparison is recomputed (@max_not_compared).
// CHECK-LABEL: func @compared_with_its_max
// CHECK-NOT: nova.rematerialized
// CHECK-LABEL: func @max_not_compared
// CHECK: nova.tanh {{.*}}nova.rematerialized
func.func @compared_with_its_max(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %v = nova.tanh %x : tensor<4x3xf32>
  %m = nova.reduce_max %v {axes = array<i64: 0>} : tensor<4x3xf32>
  %r = nova.reshape %m : tensor<3xf32> -> tensor<1x3xf32>
  %a = nova.exp %r : tensor<1x3xf32>
  %b = nova.tanh %a : tensor<1x3xf32>
  %c = nova.tanh %b : tensor<1x3xf32>
  %d = nova.tanh %c : tensor<1x3xf32>
  %e = nova.broadcast %d : tensor<1x3xf32> -> tensor<4x3xf32>
  %bm = nova.broadcast %r : tensor<1x3xf32> -> tensor<4x3xf32>
  %g = nova.greater %bm, %v : tensor<4x3xf32>, tensor<4x3xf32>
  %h = nova.mul %e, %g : tensor<4x3xf32>, tensor<4x3xf32>
  return %h : tensor<4x3xf32>
}
func.func @max_not_compared(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %v = nova.tanh %x : tensor<4x3xf32>
  %m = nova.reduce_max %v {axes = array<i64: 0>} : tensor<4x3xf32>
  %r = nova.reshape %m : tensor<3xf32> -> tensor<1x3xf32>
  %a = nova.exp %r : tensor<1x3xf32>
  %b = nova.tanh %a : tensor<1x3xf32>
  %c = nova.tanh %b : tensor<1x3xf32>
  %d = nova.tanh %c : tensor<1x3xf32>
  %e = nova.broadcast %d : tensor<1x3xf32> -> tensor<4x3xf32>
  %h = nova.mul %e, %v : tensor<4x3xf32>, tensor<4x3xf32>
  return %h : tensor<4x3xf32>
}
