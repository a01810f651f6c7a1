// RUN: nova-opt %s -nova-rematerialize=min-gap=4 -verify-each -split-input-file | FileCheck %s

// Level 2 (nova.remat = 2: a memory budget's plans) on a two-product MLP
// block and its backward, in miniature: h = x W1 (one product, 2k = 16
// flops an element, 4 flops a byte), g = gelu(h), the residual
// r = g W2 + x (two products), a cheap exp(x); then h read by the GELU's
// gradient, g by W2's gradient two ops later, exp(x) and r far later.

// Unbounded: h is recomputed before the GELU's gradient; g's chain (its
// GELU and h's product) merges with that clone, so h's product runs once
// there and the GELU reads it (not a second product two ops later); r is
// recomputed from its two products, far later (its own clones). Each
// decision records its products' flops.
// CHECK: nova.remat_decisions = [{bytes = 256 : i64, flops = 1024 : i64, what = "nova.matmul 4x16 f32: {{.*}}(4 flops a byte)"}
// CHECK-SAME: {bytes = 128 : i64, flops = 2048 : i64, what = "nova.add 4x8 f32: {{.*}}with 3 producers (nova.matmul, nova.gelu, nova.matmul), {{.*}}(16 flops a byte)"}
// CHECK-LABEL: func @unbounded
// CHECK: %[[U:.*]] = nova.matmul %{{[0-9]+}}, %arg1 :
// CHECK-NEXT: %[[H:.*]] = nova.matmul %arg0, %arg1 {nova.rematerialized}
// CHECK-NEXT: %[[DH:.*]] = nova.mul %[[U]], %[[H]]
// CHECK-NEXT: %[[G:.*]] = nova.gelu %[[H]] {nova.rematerialized}
// CHECK-NEXT: nova.matmul %[[G]], %[[DH]] {transpose_a = true}
// CHECK: nova.exp %arg0 {nova.rematerialized}
// CHECK: nova.matmul %arg0, %arg1 {nova.rematerialized}
// CHECK-NEXT: nova.gelu {{.*}}nova.rematerialized
// CHECK-NEXT: nova.matmul %{{.*}}, %arg2 {nova.rematerialized}
// CHECK-NEXT: %[[R:.*]] = nova.add {{.*}}nova.rematerialized
// CHECK-NEXT: nova.mul %{{.*}}, %[[R]]
module attributes {nova.remat = 2 : i64} {
  func.func @unbounded(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>) -> tensor<4x8xf32> {
    %h = nova.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>
    %g = nova.gelu %h : tensor<4x16xf32>
    %y = nova.matmul %g, %w2 : tensor<4x16xf32>, tensor<16x8xf32>
    %r = nova.add %y, %x : tensor<4x8xf32>, tensor<4x8xf32>
    %e = nova.exp %x : tensor<4x8xf32>
    %t0 = nova.tanh %r : tensor<4x8xf32>
    %t1 = nova.mul %t0, %e : tensor<4x8xf32>, tensor<4x8xf32>
    %t2 = nova.tanh %t1 : tensor<4x8xf32>
    %t3 = nova.tanh %t2 : tensor<4x8xf32>
    %t4 = nova.tanh %t3 : tensor<4x8xf32>
    %t5 = nova.tanh %t4 : tensor<4x8xf32>
    %u = nova.matmul %t5, %w1 : tensor<4x8xf32>, tensor<8x16xf32>
    %dh = nova.mul %u, %h : tensor<4x16xf32>, tensor<4x16xf32>
    %dw2 = nova.matmul %g, %dh {transpose_a = true} : tensor<4x16xf32>, tensor<4x16xf32>
    %v = nova.matmul %dh, %w1 {transpose_b = true} : tensor<4x16xf32>, tensor<8x16xf32>
    %s = nova.mul %v, %e : tensor<4x8xf32>, tensor<4x8xf32>
    %s1 = nova.tanh %s : tensor<4x8xf32>
    %s2 = nova.tanh %s1 : tensor<4x8xf32>
    %s3 = nova.tanh %s2 : tensor<4x8xf32>
    %s4 = nova.tanh %s3 : tensor<4x8xf32>
    %z = nova.mul %s4, %r : tensor<4x8xf32>, tensor<4x8xf32>
    return %z : tensor<4x8xf32>
  }
}

// -----

// nova.remat_max_cost = 4 flops a byte: h (4) is recomputed as above, the
// residual (16) is kept; the cheap exp still recomputed.
// CHECK-LABEL: func @bounded
// CHECK-COUNT-1: nova.matmul %arg0, %arg1 {nova.rematerialized}
// CHECK-NOT: nova.matmul %{{.*}}, %arg2 {nova.rematerialized}
// CHECK-NOT: nova.add {{.*}}nova.rematerialized
// CHECK: nova.exp %arg0 {nova.rematerialized}
// CHECK-NOT: nova.rematerialized
// CHECK: return
module attributes {nova.remat = 2 : i64, nova.remat_max_cost = 4 : i64} {
  func.func @bounded(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>) -> tensor<4x8xf32> {
    %h = nova.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>
    %g = nova.gelu %h : tensor<4x16xf32>
    %y = nova.matmul %g, %w2 : tensor<4x16xf32>, tensor<16x8xf32>
    %r = nova.add %y, %x : tensor<4x8xf32>, tensor<4x8xf32>
    %e = nova.exp %x : tensor<4x8xf32>
    %t0 = nova.tanh %r : tensor<4x8xf32>
    %t1 = nova.mul %t0, %e : tensor<4x8xf32>, tensor<4x8xf32>
    %t2 = nova.tanh %t1 : tensor<4x8xf32>
    %t3 = nova.tanh %t2 : tensor<4x8xf32>
    %t4 = nova.tanh %t3 : tensor<4x8xf32>
    %t5 = nova.tanh %t4 : tensor<4x8xf32>
    %u = nova.matmul %t5, %w1 : tensor<4x8xf32>, tensor<8x16xf32>
    %dh = nova.mul %u, %h : tensor<4x16xf32>, tensor<4x16xf32>
    %dw2 = nova.matmul %g, %dh {transpose_a = true} : tensor<4x16xf32>, tensor<4x16xf32>
    %v = nova.matmul %dh, %w1 {transpose_b = true} : tensor<4x16xf32>, tensor<8x16xf32>
    %s = nova.mul %v, %e : tensor<4x8xf32>, tensor<4x8xf32>
    %s1 = nova.tanh %s : tensor<4x8xf32>
    %s2 = nova.tanh %s1 : tensor<4x8xf32>
    %s3 = nova.tanh %s2 : tensor<4x8xf32>
    %s4 = nova.tanh %s3 : tensor<4x8xf32>
    %z = nova.mul %s4, %r : tensor<4x8xf32>, tensor<4x8xf32>
    return %z : tensor<4x8xf32>
  }
}

// -----

// nova.remat_min_gap = 100 (the budget search's gap) bounds the costly
// recomputations only: no product runs again, and the cheap exp(x), kept
// across 9 ops, is recomputed at the pass's own min-gap as at level 1.
// CHECK-LABEL: func @long_gap
// CHECK-NOT: nova.matmul {{.*}}nova.rematerialized
// CHECK: nova.exp %arg0 {nova.rematerialized}
// CHECK-NOT: nova.rematerialized
// CHECK: return
module attributes {nova.remat = 2 : i64, nova.remat_min_gap = 100 : i64} {
  func.func @long_gap(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %w2: tensor<16x8xf32>) -> tensor<4x8xf32> {
    %h = nova.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>
    %g = nova.gelu %h : tensor<4x16xf32>
    %y = nova.matmul %g, %w2 : tensor<4x16xf32>, tensor<16x8xf32>
    %r = nova.add %y, %x : tensor<4x8xf32>, tensor<4x8xf32>
    %e = nova.exp %x : tensor<4x8xf32>
    %t0 = nova.tanh %r : tensor<4x8xf32>
    %t1 = nova.mul %t0, %e : tensor<4x8xf32>, tensor<4x8xf32>
    %t2 = nova.tanh %t1 : tensor<4x8xf32>
    %t3 = nova.tanh %t2 : tensor<4x8xf32>
    %t4 = nova.tanh %t3 : tensor<4x8xf32>
    %t5 = nova.tanh %t4 : tensor<4x8xf32>
    %u = nova.matmul %t5, %w1 : tensor<4x8xf32>, tensor<8x16xf32>
    %dh = nova.mul %u, %h : tensor<4x16xf32>, tensor<4x16xf32>
    %dw2 = nova.matmul %g, %dh {transpose_a = true} : tensor<4x16xf32>, tensor<4x16xf32>
    %v = nova.matmul %dh, %w1 {transpose_b = true} : tensor<4x16xf32>, tensor<8x16xf32>
    %s = nova.mul %v, %e : tensor<4x8xf32>, tensor<4x8xf32>
    %s1 = nova.tanh %s : tensor<4x8xf32>
    %s2 = nova.tanh %s1 : tensor<4x8xf32>
    %s3 = nova.tanh %s2 : tensor<4x8xf32>
    %s4 = nova.tanh %s3 : tensor<4x8xf32>
    %z = nova.mul %s4, %r : tensor<4x8xf32>, tensor<4x8xf32>
    return %z : tensor<4x8xf32>
  }
}
