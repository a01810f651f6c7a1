// The Hopper matmul kernel (target/cuda/WgmmaMatmulKernel.cpp): one thread
// arms each stage's mbarrier with the slab's bytes and issues its TMA loads
// (A one 128 x 64 box, B two 64 x 64 boxes: MN-major, 128-byte swizzled
// rows); every thread waits for the stage's phase, builds the two 64-bit
// shared-memory descriptors, and each of the two warpgroups runs 4
// m64n128k16 wgmmas (the k steps advance the descriptors' start addresses:
// +2 for A's 32 bytes, +128 for B's 2048), commits them, waits until one
// group is pending, and after a barrier the stage freed by the previous
// slab is refilled. The accumulators stay in an LLVM struct through the
// K loop and are stored after wait_group 0.
// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=256 type=bf16 target=sm_90a wgmma=true block-m=128 block-n=128 block-k=64 warps-m=2 warps-n=1 stages=3" | FileCheck %s

// CHECK: gpu.func @matmul(%[[MA:.*]]: !llvm.ptr, %[[MB:.*]]: !llvm.ptr, %{{.*}}: memref<256x256xf32>) kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: %[[TA:.*]] = builtin.unrealized_conversion_cast %[[MA]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<128x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: %[[TB:.*]] = builtin.unrealized_conversion_cast %[[MB]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: %[[BARS:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>
// CHECK-COUNT-3: nvgpu.mbarrier.init %[[BARS]]
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: gpu.barrier
// The tiles start at the dynamic shared memory rounded up to 1024 bytes.
// CHECK: %[[DYN:.*]] = gpu.dynamic_shared_memory
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[DYN]]
// CHECK: %[[UP:.*]] = arith.addi %[[BASE]], %c1023
// CHECK: arith.andi %[[UP]], %c-1024
// Prologue: 3 stages of 32768 bytes, 3 boxes each.
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%{{.*}}], %c32768{{.*}}, predicate =
// CHECK: nvgpu.tma.async.load %[[TA]][
// CHECK: nvgpu.tma.async.load %[[TB]][
// CHECK: nvgpu.tma.async.load %[[TB]][
// CHECK: nvgpu.mbarrier.arrive.expect_tx
// CHECK: nvgpu.mbarrier.arrive.expect_tx
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (!llvm.struct<(f32,
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]]
// Descriptors: A K-major (SBO 1024, 128B swizzle), B MN-major (LBO 8192 too).
// CHECK: arith.ori %{{.*}}, %c4611686293305360384_i64 : i64
// CHECK: arith.ori %{{.*}}, %c4611686293338849280_i64 : i64
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-NEXT: %[[W0:.*]] = nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %[[ACC]], <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK: arith.addi %{{.*}}, %c128_i64 : i64
// CHECK: arith.addi %{{.*}}, %c2_i64 : i64
// CHECK: nvvm.wgmma.mma_async {{.*}}, %[[W0]], <m = 64, n = 128, k = 16>
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if
// CHECK: nvgpu.mbarrier.arrive.expect_tx
// CHECK: nvgpu.tma.async.load %[[TA]]
// CHECK: scf.yield
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.extractvalue
// CHECK: vector.store {{.*}} : memref<256x256xf32>, vector<2xf32>
// CHECK: gpu.return
