// Attention with heads of 64 columns: 4 lanes of a warp a row (16 columns
// each in registers), a dot product summed over a row's lanes by a
// butterfly of shuffles (xor 2, 1) inside a branch only the same in all
// of a warp's lanes takes (a key its rows need: a shuffle in a branch that
// lanes of a warp take apart would read lanes that are not there), the
// causal mask after it a select of the score. A thread takes 4 rows
// forward (2 backward: as many as 128 registers hold their own columns of
// q and the output; of q, g, dq; of k, v, dk, dv). Forward: 40 rows,
// rounded to whole warps: 64 rows x 4 lanes / 4 rows a thread = 64
// threads; one tile of 40 key rows (k, v: 2 x 40 x 64 floats). The
// backward's two kernels (query rows, key rows) likewise, 128 threads.
// attention-mma=0: the kernels of a row at a time, which f32 heads of 64
// would otherwise leave for the tensor cores (gpu-threads-attention-mma).
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 attention-mma=0" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 attention-mma=0" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: module @kernels
// CHECK: func.func @{{k[0-9_]+}}({{.*}}nova.gpu_shared_bytes = 20480 : i64
// CHECK-SAME: "threads: 40 query rows of 1 attention (batch, head) pairs, 4 threads (their shuffles sum a dot product) per 4 rows
// CHECK-SAME: #nova.lowering_config<gpu_threads, workgroups = 1, tile = [64]
// CHECK: func.func @[[BWD:k[0-9]+]]({{.*}}nova.gpu_shared_bytes = 20480 : i64
// CHECK-SAME: "threads: 40 query rows (dq; each row's softmax statistics into the workspace) of 1 attention (batch, head) pairs, 4 threads (their shuffles sum a dot product) per 2 rows
// CHECK-SAME: #nova.lowering_config<gpu_threads, workgroups = 1, tile = [128]
// CHECK: func.func @[[BWD]]_keys({{.*}}nova.gpu_shared_bytes = 20480 : i64
// CHECK-SAME: "threads: 40 key rows (dk, dv; the query rows' statistics from the workspace) of 1 attention (batch, head) pairs, 4 threads (their shuffles sum a dot product) per 2 rows

// GPU: gpu.func @nova_{{k[0-9_]+}}(%{{[^:]*}}: memref<1x40x192xf32>, %{{[^:]*}}: memref<1x40x64xf32>) kernel
// GPU-SAME: known_block_size = array<i32: 64, 1, 1>
// GPU: gpu.barrier
// GPU: scf.for
// GPU: arith.cmpi ule
// GPU-NEXT: scf.if
// GPU: gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32 : f32
// GPU: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// GPU: arith.cmpi ule
// GPU-NEXT: arith.select
// GPU: gpu.barrier
// GPU: gpu.return
func.func @attention(%qkv: tensor<1x40x192xf32>, %g: tensor<1x40x64xf32>) -> (tensor<1x40x64xf32>, tensor<1x40x192xf32>) {
  %0 = nova.causal_attention %qkv {heads = 1 : i64, scale = 0.125 : f64} : tensor<1x40x192xf32> -> tensor<1x40x64xf32>
  %1 = nova.causal_attention_grad %qkv, %g {heads = 1 : i64, scale = 0.125 : f64} : tensor<1x40x192xf32>, tensor<1x40x64xf32>
  return %0, %1 : tensor<1x40x64xf32>, tensor<1x40x192xf32>
}
