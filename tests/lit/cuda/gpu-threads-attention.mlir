// Causal attention on the GPU, a thread per few rows (heads of up to 64
// columns; as many rows a thread as 128 registers hold the rows' own
// vectors: 4 forward, 2 backward here). The forward: B x heads x
// ceil(T / 128) blocks of 32 threads, 4 adjacent query rows each (the last
// rows' blocks, the most keys, first), one pass of online softmax with the
// rows' outputs in registers (f32 scores in log2 units, exponentials by
// ex2.approx), over tiles of 64 key rows (k and v: 2 x 64 x 4 floats in
// shared memory) that the block loads together between barriers. The backward in two kernels (nova-gpu-threads splits it; a
// workspace of each query row's log-sum-exp and D between them, allocated
// before the first launch and passed to both): B x heads x ceil(T / 64)
// blocks of 32 threads of query rows (dq; the statistics into the
// workspace), then as many of key rows (dk, dv) over tiles of q and g rows.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK: nova.launch @kernels::@[[FWD:k[0-9]+]](
// CHECK: %[[STATS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x300x2xf32>
// CHECK: nova.launch @kernels::@[[BWD:k[0-9]+]](%{{.*}}, %{{.*}}, %{{.*}}, %[[STATS]])
// CHECK-NEXT: nova.launch @kernels::@[[BWD]]_keys(%{{.*}}, %{{.*}}, %{{.*}}, %[[STATS]])
// CHECK-LABEL: module @kernels
// CHECK: func.func @[[FWD]]({{.*}}nova.gpu_shared_bytes = 2048 : i64
// CHECK-SAME: "threads: 300 query rows of 4 attention (batch, head) pairs, a thread per 4 rows (online softmax, a row's values in registers) over 12 blocks of 32"
// CHECK-SAME: #nova.lowering_config<gpu_threads, workgroups = 12, tile = [32]
// CHECK: nova.attention_kernel
// CHECK: func.func @[[BWD]]({{.*}}: memref<4x300x2xf32>) attributes {nova.attention_part = "queries"
// CHECK-SAME: nova.gpu_shared_bytes = 2048 : i64
// CHECK-SAME: "threads: 300 query rows (dq; each row's softmax statistics into the workspace) of 4 attention (batch, head) pairs, a thread per 2 rows {{.*}} over 20 blocks of 32"
// CHECK-SAME: #nova.lowering_config<gpu_threads, workgroups = 20, tile = [32]
// CHECK: nova.attention_kernel {{.*}}backward
// CHECK: func.func @[[BWD]]_keys({{.*}}: memref<4x300x2xf32>) attributes {nova.attention_part = "keys"
// CHECK-SAME: "threads: 300 key rows (dk, dv; the query rows' statistics from the workspace) of 4 attention (batch, head) pairs, a thread per 2 rows {{.*}} over 20 blocks of 32"
// CHECK-SAME: #nova.lowering_config<gpu_threads, workgroups = 20, tile = [32]
// CHECK: nova.attention_kernel {{.*}}backward

// The forward: the tile loop's bounds are the block's (its last row); in
// a tile, the block's threads copy it (8 rounds of 32), a barrier, the
// key loop: a key the warp's rows need (a branch the same in all its
// lanes, up to the warp's last row) is read from shared memory once for
// the thread's 4 rows, each row's causal mask a select of its score (-inf
// where masked); the rows' max, sum and 4 outputs carried (24 values); a
// barrier before the next tile; each row's output stored where it exists.
// GPU: gpu.func @nova_{{k[0-9_]+}}(%{{[^:]*}}: memref<2x300x24xf32>, %{{[^:]*}}: memref<2x300x8xf32>) kernel
// GPU-SAME: known_block_size = array<i32: 32, 1, 1>
// GPU: gpu.dynamic_shared_memory
// GPU: memref.view {{.*}} to memref<64x4xf32, #gpu.address_space<workgroup>>
// GPU: memref.view {{.*}} to memref<64x4xf32, #gpu.address_space<workgroup>>
// GPU: scf.for {{.*}} iter_args({{.*}}) -> ({{(f32, ){23}f32}})
// GPU-NEXT: arith.muli
// GPU: scf.for {{.*}} = %c0 to %c8 step %c1 {
// GPU: gpu.barrier
// GPU: scf.for {{.*}} iter_args({{.*}}) -> ({{(f32, ){23}f32}})
// GPU-NEXT: arith.cmpi ule
// GPU-NEXT: scf.if {{.*}} -> ({{(f32, ){23}f32}})
// GPU-COUNT-4: arith.select
// GPU: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// GPU: gpu.barrier
// GPU-COUNT-4: arith.divf
// GPU: gpu.return
// The backward's query rows: two passes over the key tiles (the
// statistics, then dq), the statistics stored into the workspace; its key
// rows: one pass over the query tiles, the statistics loaded from it.
// GPU: gpu.func @nova_[[Q:k[0-9]+]](%{{[^:]*}}: memref<2x300x24xf32>, %{{[^:]*}}: memref<2x300x8xf32>, %{{[^:]*}}: memref<2x300x24xf32>, %[[W:[^:]*]]: memref<4x300x2xf32>) kernel
// GPU-SAME: known_block_size = array<i32: 32, 1, 1>
// GPU: gpu.dynamic_shared_memory
// GPU: arith.cmpi ule
// GPU: gpu.barrier
// GPU: arith.cmpi ule
// GPU: memref.store {{.*}}, %[[W]][
// GPU: gpu.return
// GPU: gpu.func @nova_[[Q]]_keys(%{{[^:]*}}: memref<2x300x24xf32>, %{{[^:]*}}: memref<2x300x8xf32>, %{{[^:]*}}: memref<2x300x24xf32>, %[[W2:[^:]*]]: memref<4x300x2xf32>) kernel
// GPU: gpu.dynamic_shared_memory
// GPU: arith.cmpi uge
// GPU: memref.load %[[W2]][
// GPU: gpu.return
func.func @attention(%qkv: tensor<2x300x24xf32>, %g: tensor<2x300x8xf32>) -> (tensor<2x300x8xf32>, tensor<2x300x24xf32>) {
  %0 = nova.causal_attention %qkv {heads = 2 : i64, scale = 0.5 : f64} : tensor<2x300x24xf32> -> tensor<2x300x8xf32>
  %1 = nova.causal_attention_grad %qkv, %g {heads = 2 : i64, scale = 0.5 : f64} : tensor<2x300x24xf32>, tensor<2x300x8xf32>
  return %0, %1 : tensor<2x300x8xf32>, tensor<2x300x24xf32>
}
