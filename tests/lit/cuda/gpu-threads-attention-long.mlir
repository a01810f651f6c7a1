// A long sequence (6000) runs a row at a time on every target: the
// backward's rows' softmax statistics (2 x T values: log-sum-exp, D) pass between its two
// kernels in a global workspace, so only the two tiles (2 x 64 x 64 f32:
// 32 KiB) take shared memory, within what sm_86 lets a block take. Heads
// wider than 128 columns keep the kernel of a thread per (batch, head),
// forward and backward (one kernel: no split).
// attention-mma=0: the kernels of a row at a time, which f32 heads of 64
// would otherwise leave for the tensor cores (gpu-threads-attention-mma).
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_86 attention-mma=0" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_86 attention-mma=0" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_86}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x6000x2xf32>
// CHECK-NOT: memref.alloc() {alignment = 64 : i64} : memref<{{.*}}x2xf32>
// CHECK-LABEL: module @kernels
// CHECK: func.func @{{k[0-9_]+}}({{.*}}nova.gpu_shared_bytes = 32768 : i64
// CHECK-SAME: "threads: 6000 query rows of 1 attention (batch, head) pairs, 4 threads (their shuffles sum a dot product) per 4 rows
// CHECK-SAME: workgroups = 47, tile = [128]
// CHECK: func.func @[[BWD:k[0-9]+]]({{.*}}nova.gpu_shared_bytes = 32768 : i64
// CHECK-SAME: "threads: 6000 query rows (dq; each row's softmax statistics into the workspace)
// CHECK-SAME: workgroups = 94, tile = [128]
// CHECK: func.func @[[BWD]]_keys({{.*}}nova.gpu_shared_bytes = 32768 : i64
// CHECK-SAME: "threads: 6000 key rows (dk, dv; the query rows' statistics from the workspace)
// CHECK-SAME: workgroups = 94, tile = [128]
// CHECK: func.func @{{k[0-9_]+}}(
// CHECK-NOT: nova.gpu_shared_bytes
// CHECK-SAME: "threads: 2 attention (batch, head) pairs (heads of 136 columns: wider than a thread's registers take, 128)
// CHECK: func.func @{{k[0-9]+}}(
// CHECK-NOT: nova.attention_part
// CHECK-SAME: "threads: 2 attention (batch, head) pairs (heads of 136 columns: wider than a thread's registers take, 128)
// CHECK-NOT: _keys(
// GPU: gpu.func @nova_{{k[0-9_]+}}(
// GPU: gpu.func @nova_{{k[0-9_]+}}({{.*}}known_block_size = array<i32: 128, 1, 1>
// GPU: gpu.dynamic_shared_memory
// GPU: gpu.barrier
func.func @attention(%qkv: tensor<1x6000x192xf32>, %g: tensor<1x6000x64xf32>) -> (tensor<1x6000x64xf32>, tensor<1x6000x192xf32>) {
  %0 = nova.causal_attention %qkv {heads = 1 : i64, scale = 0.125 : f64} : tensor<1x6000x192xf32> -> tensor<1x6000x64xf32>
  %1 = nova.causal_attention_grad %qkv, %g {heads = 1 : i64, scale = 0.125 : f64} : tensor<1x6000x192xf32>, tensor<1x6000x64xf32>
  return %0, %1 : tensor<1x6000x64xf32>, tensor<1x6000x192xf32>
}
func.func @wide(%qkv: tensor<2x5x408xf32>, %g: tensor<2x5x136xf32>) -> (tensor<2x5x136xf32>, tensor<2x5x408xf32>) {
  %0 = nova.causal_attention %qkv {heads = 1 : i64, scale = 0.125 : f64} : tensor<2x5x408xf32> -> tensor<2x5x136xf32>
  %1 = nova.causal_attention_grad %qkv, %g {heads = 1 : i64, scale = 0.125 : f64} : tensor<2x5x408xf32>, tensor<2x5x136xf32>
  return %0, %1 : tensor<2x5x136xf32>, tensor<2x5x408xf32>
}
