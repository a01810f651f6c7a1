// Causal attention on the GPU, a thread per row (heads of up to 64
// columns). The forward: B x heads x ceil(T / 128) blocks of 128 threads,
// a query row each, one pass of online softmax with the row's output in
// registers, over tiles of 64 key rows (k and v: 2 x 64 x 4 floats in
// shared memory) that the block loads together between barriers. The
// backward: a block per (batch, head), its threads first a query row each
// (dq; the row's max, sum and D into shared memory: 3 x T floats, then
// the k and v tiles), a barrier, then a key row each (dk, dv) over tiles
// of q and g rows.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: module @kernels
// CHECK: func.func @[[FWD:k[0-9_]+]]({{.*}}nova.gpu_shared_bytes = 2048 : i64
// CHECK-SAME: "threads: 300 query rows of 4 attention (batch, head) pairs, a thread per row (online softmax, a row's values in registers) over 12 blocks of 128"
// CHECK-SAME: #nova.lowering_config<gpu_threads, workgroups = 12, tile = [128]
// CHECK: nova.attention_kernel
// CHECK: func.func @[[BWD:k[0-9_]+]]({{.*}}nova.gpu_shared_bytes = 5648 : i64
// CHECK-SAME: "threads: 4 attention (batch, head) pairs, a block each
// CHECK-SAME: #nova.lowering_config<gpu_threads, workgroups = 4, tile = [256]
// CHECK: nova.attention_kernel {{.*}}backward

// The forward: the tile loop's bounds are the block's (its last row); in
// a tile, the block's threads copy it (2 rounds of 128), a barrier, the
// key loop with the causal mask a branch inside (the row's max, sum and 4
// outputs carried), a barrier before the next tile.
// GPU: gpu.func @nova_{{k[0-9_]+}}(%{{[^:]*}}: memref<2x300x24xf32>, %{{[^:]*}}: memref<2x300x8xf32>) kernel
// GPU-SAME: known_block_size = array<i32: 128, 1, 1>
// GPU: gpu.dynamic_shared_memory
// GPU: memref.view {{.*}} to memref<64x4xf32, #gpu.address_space<workgroup>>
// GPU: memref.view {{.*}} to memref<64x4xf32, #gpu.address_space<workgroup>>
// GPU: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32)
// GPU-NEXT: arith.muli
// GPU: scf.for {{.*}} = %c0 to %c2 step %c1 {
// GPU: gpu.barrier
// GPU: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32)
// GPU: arith.cmpi ule
// GPU: scf.if {{.*}} -> (f32, f32, f32, f32, f32, f32)
// GPU: arith.maximumf
// GPU: math.exp
// GPU: gpu.barrier
// GPU: arith.divf
// GPU: gpu.return
// The backward: the statistics in shared memory between the two passes.
// GPU: gpu.func @nova_{{k[0-9_]+}}(%{{[^:]*}}: memref<2x300x24xf32>, %{{[^:]*}}: memref<2x300x8xf32>, %{{[^:]*}}: memref<2x300x24xf32>) kernel
// GPU: gpu.dynamic_shared_memory
// GPU: memref.view {{.*}} to memref<300x3xf32, #gpu.address_space<workgroup>>
// GPU: arith.cmpi ule
// GPU: gpu.barrier
// GPU: arith.cmpi uge
// GPU: gpu.return
func.func @attention(%qkv: tensor<2x300x24xf32>, %g: tensor<2x300x8xf32>) -> (tensor<2x300x8xf32>, tensor<2x300x24xf32>) {
  %0 = nova.causal_attention %qkv {heads = 2 : i64, scale = 0.5 : f64} : tensor<2x300x24xf32> -> tensor<2x300x8xf32>
  %1 = nova.causal_attention_grad %qkv, %g {heads = 2 : i64, scale = 0.5 : f64} : tensor<2x300x24xf32>, tensor<2x300x8xf32>
  return %0, %1 : tensor<2x300x8xf32>, tensor<2x300x24xf32>
}
