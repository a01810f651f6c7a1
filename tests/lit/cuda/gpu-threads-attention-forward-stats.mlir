// Attention's forward and backward on the tensor cores in one step, O read
// by a matmul and by the weight gradient (as a GPT's output projection):
// nova-gpu-threads pairs the backward's query rows with the forward
// (GpuAttentionForwardStats.h). The forward takes a last buffer [batch x
// heads, T] of f32 (allocated before its launch) for its rows' log-sum-exp;
// the query rows take the workspace, then O (the forward's result buffer)
// and that buffer, and run one pass over the keys (D from O and dO); the
// key rows take the workspace as before. In the kernels: the forward's
// log-sum-exp stores, the query rows' loads of it and of O (vector loads
// of 4), and one loop over the key tiles where there were two.
// Where O is written over before the backward (an elementwise op its
// last use), nothing is paired (gpu-threads-attention-mma.mlir).
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=MAP

// CHECK: %[[LSE:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x200xf32>
// CHECK-NEXT: nova.launch @kernels::@[[FWD:k[0-9]+]](%{{.*}}, %[[O:.*]], %[[LSE]])
// CHECK: %[[STATS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x200x2xf32>
// CHECK-NEXT: nova.launch @kernels::@[[BWD:k[0-9]+]](%{{.*}}, %{{.*}}, %{{.*}}, %[[STATS]], %[[O]], %[[LSE]])
// CHECK-NEXT: nova.launch @kernels::@[[BWD]]_keys(%{{.*}}, %{{.*}}, %{{.*}}, %[[STATS]])
// CHECK-LABEL: module @kernels
// CHECK: func.func @[[FWD]]({{.*}}: memref<4x200xf32>) attributes {nova.attention_writes_lse, nova.gpu_attention_mma = "tf32x3"
// CHECK-SAME: "its rows' log-sum-exp into a buffer of their own, for the backward's query rows"
// CHECK: func.func @[[BWD]]({{.*}}: memref<4x200x2xf32>, %{{.*}}: memref<2x200x128xf32>, %{{.*}}: memref<4x200xf32>) attributes {nova.attention_forward_stats, nova.attention_part = "queries"
// CHECK-SAME: "the forward's log-sum-exp, and D = dO . O from its result: one pass over the keys (three products a tile), where computing the statistics took a pass of two more"
// CHECK: func.func @[[BWD]]_keys({{.*}}: memref<4x200x2xf32>) attributes {nova.attention_part = "keys"

// MAP: func.func @{{k[0-9]+}}({{.*}}memref<4x200xf32>) attributes {{{.*}}nova.attention_writes_lse
// MAP: scf.for
// MAP: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<4x200xf32>
// MAP: func.func @{{k[0-9]+}}({{.*}}nova.attention_forward_stats
// MAP-NOT: scf.for
// MAP: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<4x200xf32>
// MAP: vector.load %{{.*}} : memref<2x200x128xf32>, vector<4xf32>
// MAP: scf.for
// MAP-NOT: scf.for
// MAP: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %c0] : memref<4x200x2xf32>, vector<2xf32>
// MAP: func.func @{{k[0-9]+}}_keys(
func.func @step(%qkv: tensor<2x200x384xf32>, %w: tensor<2x128x128xf32>, %dy: tensor<2x200x128xf32>)
    -> (tensor<2x200x128xf32>, tensor<2x128x128xf32>, tensor<2x200x384xf32>) {
  %o = nova.causal_attention %qkv {heads = 2 : i64, scale = 0.125 : f64} : tensor<2x200x384xf32> -> tensor<2x200x128xf32>
  %y = nova.matmul %o, %w : tensor<2x200x128xf32>, tensor<2x128x128xf32>
  %dw = nova.matmul %o, %dy {transpose_a = true} : tensor<2x200x128xf32>, tensor<2x200x128xf32>
  %do = nova.matmul %dy, %w {transpose_b = true} : tensor<2x200x128xf32>, tensor<2x128x128xf32>
  %dqkv = nova.causal_attention_grad %qkv, %do {heads = 2 : i64, scale = 0.125 : f64} : tensor<2x200x384xf32>, tensor<2x200x128xf32>
  return %y, %dw, %dqkv : tensor<2x200x128xf32>, tensor<2x128x128xf32>, tensor<2x200x384xf32>
}
