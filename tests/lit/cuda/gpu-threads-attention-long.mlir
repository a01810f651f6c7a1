// The attention backward keeps its rows' softmax statistics (3 x T values)
// in shared memory beside its two tiles: for a sequence of 6000 (f32,
// heads of 64: 72000 + 32768 bytes) that passes what sm_86 lets a block
// take (99 KiB opted in), so there the backward is the kernel of a thread
// per (batch, head), with no shared memory; the forward keeps its rows
// (tiles only). sm_90a lets a block take 227 KiB: the backward keeps its
// rows too, and the kernel is built within the bytes it recorded.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_86" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_90a" -verify-each | FileCheck %s --check-prefix=H100
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_90a" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_90a}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=H100-GPU

// CHECK-LABEL: module @kernels
// CHECK: func.func @{{k[0-9_]+}}({{.*}}nova.gpu_shared_bytes = 32768 : i64
// CHECK-SAME: "threads: 6000 query rows of 1 attention (batch, head) pairs, 4 threads (their shuffles sum a dot product) per row
// CHECK: func.func @{{k[0-9_]+}}(
// CHECK-NOT: nova.gpu_shared_bytes
// CHECK-SAME: "threads: 1 attention (batch, head) pairs (a sequence of 6000: its rows' softmax statistics and tiles would pass 101376 bytes of shared memory)
// H100-LABEL: module @kernels
// H100: func.func @{{k[0-9_]+}}({{.*}}nova.gpu_shared_bytes = 32768 : i64
// H100: func.func @{{k[0-9_]+}}({{.*}}nova.gpu_shared_bytes = 104768 : i64
// H100-SAME: "threads: 1 attention (batch, head) pairs, a block each
// H100-GPU: gpu.func @nova_{{k[0-9_]+}}(
// H100-GPU: gpu.func @nova_{{k[0-9_]+}}({{.*}}known_block_size = array<i32: 512, 1, 1>
// H100-GPU: gpu.dynamic_shared_memory
// H100-GPU: gpu.barrier
func.func @attention(%qkv: tensor<1x6000x192xf32>, %g: tensor<1x6000x64xf32>) -> (tensor<1x6000x64xf32>, tensor<1x6000x192xf32>) {
  %0 = nova.causal_attention %qkv {heads = 1 : i64, scale = 0.125 : f64} : tensor<1x6000x192xf32> -> tensor<1x6000x64xf32>
  %1 = nova.causal_attention_grad %qkv, %g {heads = 1 : i64, scale = 0.125 : f64} : tensor<1x6000x192xf32>, tensor<1x6000x64xf32>
  return %0, %1 : tensor<1x6000x64xf32>, tensor<1x6000x192xf32>
}
