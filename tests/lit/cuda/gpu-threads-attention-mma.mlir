// Attention's products run on the tensor cores (GpuAttentionMma.h) with
// the operands the step's matmul precision (nova.matmul_precision) gives
// the matmuls. bf16: the forward, and the backward's query-rows and
// key-rows kernels, each in blocks of 128 threads over 64 rows (T = 200: 4
// row blocks a (batch, head), 2 x 2 pairs), with two buffers of two bf16
// tiles of 64 rows x 64 columns (32 KiB) of shared memory and a staging
// buffer the next tiles' f32 rows are copied ahead into by cp.async (32
// KiB; each thread reads back its own quads and rounds them into the
// tiles; 64 KiB in all, the key rows 1 KiB more for two buffers of the
// query rows' statistics; 144 KiB for the head of 128, its own rows in a
// tile of their own); their K steps are ldmatrix
// (.trans for the tiles whose rows are the product's K) and the bf16
// mma.sync intrinsic, a row's max and sum over its 4 lanes by shuffles,
// its exponentials 2^x by ex2.approx, P's elements rounded to bf16 a pair
// at a time (cvt.rn.bf16x2.f32). Heads of 128 columns: the backward
// takes each visited tile in two halves of 32 rows (its warps hold twice
// the forward's accumulators), its own rows in two bf16 tiles of their own
// (160 KiB, the key rows 161.5 KiB, within the A100's 163).
// fp32: 3xtf32 (each f32 operand split into big and small tf32 halves by
// bit masks, three m16n8k8 MMAs a product), the tiles f32 with rows padded
// to 68 (17408 bytes each), the own rows in tiles of their own, the
// visited rows' in two buffers: 5 tiles forward (87040 bytes), 6 backward
// (104448; key rows 1024 more for the statistics), and for the head of
// 128, whose two buffers (168960 bytes) would not fit the A100's 166912,
// one: 3 tiles of 132-element rows (101376 bytes; the backward 4, 135168
// and 135680);
// own rows and the tiles' rows as B's columns by ldmatrix (vector<4x1xf32>:
// the tf32 fragment), the tiles' rows as B's k by scalar loads. tf32: the
// same kernels, one MMA a product, no split.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU
// RUN: sed -e 's/"bf16"/"fp32"/' %s | nova-opt -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | FileCheck %s --check-prefix=FP32
// RUN: sed -e 's/"bf16"/"fp32"/' %s | nova-opt -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=FP32GPU
// RUN: sed -e 's/"bf16"/"tf32"/' %s | nova-opt -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | FileCheck %s --check-prefix=TF32
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 attention-mma=0" -verify-each \
// RUN:   | FileCheck %s --check-prefix=ROWS

// CHECK-LABEL: module @kernels
// CHECK: func.func @[[FWD:k[0-9]+]]({{.*}}nova.gpu_attention_mma = "bf16", nova.gpu_attention_tile_stages = 2 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 65536 : i64
// CHECK-SAME: "on the bf16 tensor cores (mma.sync m16n8k16, f32 sums, as the step's bf16 matmul precision allows): 16 blocks of 64 query rows, the rows they visit in tiles of 64, double-buffered (the next tiles land while these are read), in 65536 bytes of shared memory"
// CHECK-SAME: workgroups = 16, tile = [128]
// CHECK: func.func @[[BWD:k[0-9]+]]({{.*}}nova.attention_part = "queries", nova.gpu_attention_mma = "bf16"
// CHECK-SAME: 16 blocks of 64 query rows (dq; each row's softmax statistics into the workspace), the rows they visit in tiles of 64
// CHECK: func.func @[[BWD]]_keys({{.*}}nova.attention_part = "keys", nova.gpu_attention_mma = "bf16"
// CHECK-SAME: 16 blocks of 64 key rows (dk, dv; the query rows' statistics from the workspace), the rows they visit in tiles of 64
// CHECK: func.func @{{k[0-9]+}}({{.*}}nova.gpu_attention_mma = "bf16", nova.gpu_attention_tile_stages = 2 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 147456 : i64
// CHECK: func.func @[[WIDE:k[0-9]+]]({{.*}}nova.attention_part = "queries", nova.gpu_attention_mma = "bf16", nova.gpu_attention_tile_stages = 2 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 163840 : i64
// CHECK-SAME: 4 blocks of 64 query rows (dq; each row's softmax statistics into the workspace), the rows they visit in tiles of 64 (taken 32 rows at a time: the backward's heads of 128), double-buffered
// CHECK: func.func @[[WIDE]]_keys({{.*}}nova.attention_part = "keys", nova.gpu_attention_mma = "bf16", nova.gpu_attention_tile_stages = 2 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 165376 : i64
// CHECK-SAME: (taken 32 rows at a time: the backward's heads of 128)

// GPU: gpu.func @nova_[[F:k[0-9]+]](
// GPU-SAME: known_block_size = array<i32: 128, 1, 1>
// GPU: gpu.dynamic_shared_memory
// GPU: vector.load {{.*}} vector<4xf32>
// GPU: arith.truncf {{.*}} to vector<4xbf16>
// The first tiles copied ahead into the staging buffer, one group; in the
// loop: wait for it, round this thread's quads into the tiles, copy the
// next tiles (zero-fill past the last), a barrier before the products.
// GPU: nvgpu.device_async_copy {{.*}}, 4 {bypassL1} : memref<2x200x384xf32> to memref<8192xf32, #gpu.address_space<workgroup>>
// GPU: %[[INFLIGHT:.*]] = nvgpu.device_async_create_group
// GPU: scf.for
// GPU: nvgpu.device_async_wait %[[INFLIGHT]] {numGroups = 0 : i32}
// GPU: vector.load {{.*}} : memref<8192xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// GPU: arith.truncf {{.*}} to vector<4xbf16>
// GPU: nvgpu.device_async_copy {{.*}}, 4, %{{.*}} {bypassL1} : memref<2x200x384xf32> to memref<8192xf32, #gpu.address_space<workgroup>>
// GPU: nvgpu.device_async_create_group
// GPU: gpu.barrier
// GPU: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// GPU: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"
// GPU: gpu.shuffle  xor
// GPU: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// GPU: llvm.call_intrinsic "llvm.nvvm.ff2bf16x2.rn"({{.*}}) : (f32, f32) -> vector<2xbf16>
// GPU: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// Two buffers: no barrier after the products (the next iteration rounds
// into the other buffer); after the loops, the last copies waited for.
// GPU-NOT: gpu.barrier
// GPU: scf.yield
// GPU: nvgpu.device_async_wait %[[INFLIGHT]] {numGroups = 0 : i32}
// GPU: gpu.return
// Heads of 128: the backward's query rows and key rows take each visited
// tile in halves of 32 rows, a loop carrying dq (16 accumulators), or dk
// and dv (32).
// GPU: gpu.func @nova_[[WIDE:k[0-9]+]](%arg0: memref<1x200x384xf32>, %arg1: memref<1x200x128xf32>, %arg2: memref<1x200x384xf32>
// GPU: %{{.*}}:16 = scf.for %{{.*}} = %c0 to %c64 step %c32 iter_args
// GPU: gpu.func @nova_[[WIDE]]_keys(
// GPU: %{{.*}}:32 = scf.for %{{.*}} = %c0 to %c64 step %c32 iter_args

// FP32: func.func @{{k[0-9]+}}({{.*}}nova.gpu_attention_mma = "tf32x3", nova.gpu_attention_tile_stages = 2 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 87040 : i64
// FP32-SAME: "on the tensor cores as 3xtf32 (mma.sync m16n8k8, each f32 operand split into big and small tf32 halves, three MMAs a product, f32 sums: about f32's accuracy): 16 blocks of 64 query rows, the rows they visit in tiles of 64, double-buffered (the next tiles land while these are read), in 87040 bytes of shared memory"
// FP32: func.func @[[BWD:k[0-9]+]]({{.*}}nova.attention_part = "queries", nova.gpu_attention_mma = "tf32x3", nova.gpu_attention_tile_stages = 2 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 104448 : i64
// FP32: func.func @[[BWD]]_keys({{.*}}nova.attention_part = "keys", nova.gpu_attention_mma = "tf32x3", nova.gpu_attention_tile_stages = 2 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 105472 : i64
// FP32: func.func @{{k[0-9]+}}({{.*}}nova.gpu_attention_mma = "tf32x3", nova.gpu_attention_tile_stages = 1 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 101376 : i64
// FP32-SAME: "{{.*}} in tiles of 64, one buffer (two would not fit), in 101376 bytes of shared memory"
// FP32: func.func @[[WIDE:k[0-9]+]]({{.*}}nova.attention_part = "queries", nova.gpu_attention_mma = "tf32x3", nova.gpu_attention_tile_stages = 1 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 135168 : i64
// FP32-SAME: in tiles of 64 (taken 32 rows at a time: the backward's heads of 128), one buffer (two would not fit)
// FP32: func.func @[[WIDE]]_keys({{.*}}nova.attention_part = "keys", nova.gpu_attention_mma = "tf32x3", nova.gpu_attention_tile_stages = 1 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 135680 : i64

// FP32GPU: gpu.func @nova_{{k[0-9]+}}(
// FP32GPU: gpu.dynamic_shared_memory
// FP32GPU: memref.view {{.*}} to memref<64x68xf32, #gpu.address_space<workgroup>>
// FP32GPU-NOT: arith.truncf
// FP32GPU: nvgpu.device_async_copy {{.*}} : memref<2x200x384xf32> to memref<64x68xf32, #gpu.address_space<workgroup>>
// FP32GPU: nvgpu.device_async_create_group
// FP32GPU: nvgpu.device_async_wait {{.*}} {numGroups = 0 : i32}
// FP32GPU-NEXT: gpu.barrier
// The first visited tiles copied ahead; in the loop, a tile's copies
// land, a barrier publishes them (and ends the reads of the other
// buffer), the next tiles go into the other buffer (zero-fill past the
// last), then the products.
// FP32GPU: nvgpu.device_async_copy {{.*}}, 4 {bypassL1} : memref<2x200x384xf32> to memref<64x68xf32, #gpu.address_space<workgroup>>
// FP32GPU: %[[FIRST:.*]] = nvgpu.device_async_create_group
// FP32GPU: scf.for
// FP32GPU: nvgpu.device_async_wait %[[FIRST]] {numGroups = 0 : i32}
// FP32GPU-NEXT: gpu.barrier
// FP32GPU: arith.xori
// FP32GPU: nvgpu.device_async_copy {{.*}}, 4, %{{.*}} {bypassL1} : memref<2x200x384xf32> to memref<64x68xf32, #gpu.address_space<workgroup>>
// FP32GPU: nvgpu.device_async_create_group
// FP32GPU: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x68xf32, #gpu.address_space<workgroup>> -> vector<4x1xf32>
// FP32GPU: arith.andi {{.*}}, %c-8192_i32 : i32
// FP32GPU: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>)
// FP32GPU-NEXT: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 8], tf32Enabled}
// FP32GPU-NEXT: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 8], tf32Enabled}
// FP32GPU: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// FP32GPU: memref.load {{.*}} : memref<64x68xf32, #gpu.address_space<workgroup>>
// FP32GPU: gpu.return

// TF32: func.func @{{k[0-9]+}}({{.*}}nova.gpu_attention_mma = "tf32", nova.gpu_attention_tile_stages = 2 : i64, nova.gpu_block_threads = 128 : i64, nova.gpu_shared_bytes = 87040 : i64
// TF32-SAME: "on the tf32 tensor cores (mma.sync m16n8k8, f32 sums, as the step's tf32 matmul precision allows)

// ROWS-NOT: nova.gpu_attention_mma
// ROWS: "threads: 200 query rows of 4 attention (batch, head) pairs
module attributes {nova.matmul_precision = "bf16"} {
  func.func @attention(%qkv: tensor<2x200x384xf32>, %g: tensor<2x200x128xf32>) -> (tensor<2x200x128xf32>, tensor<2x200x384xf32>) {
    %0 = nova.causal_attention %qkv {heads = 2 : i64, scale = 0.125 : f64} : tensor<2x200x384xf32> -> tensor<2x200x128xf32>
    %1 = nova.causal_attention_grad %qkv, %g {heads = 2 : i64, scale = 0.125 : f64} : tensor<2x200x384xf32>, tensor<2x200x128xf32>
    return %0, %1 : tensor<2x200x128xf32>, tensor<2x200x384xf32>
  }
  func.func @wide(%qkv: tensor<1x200x384xf32>, %g: tensor<1x200x128xf32>) -> (tensor<1x200x128xf32>, tensor<1x200x384xf32>) {
    %0 = nova.causal_attention %qkv {heads = 1 : i64, scale = 0.125 : f64} : tensor<1x200x384xf32> -> tensor<1x200x128xf32>
    %1 = nova.causal_attention_grad %qkv, %g {heads = 1 : i64, scale = 0.125 : f64} : tensor<1x200x384xf32>, tensor<1x200x128xf32>
    return %0, %1 : tensor<1x200x128xf32>, tensor<1x200x384xf32>
  }
}
