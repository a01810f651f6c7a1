// The Hopper matmul kernel (target/cuda/WgmmaMatmulKernel.cpp),
// warp-specialized: warpgroup 2 produces, warpgroups 0 and 1 consume, and
// they meet only at mbarriers (full[s]: count 1, the slab's bytes; empty[s]:
// count 2, one release a consumer warpgroup). One producer thread waits for
// a stage's release from its third slab on, arms its full barrier with the
// slab's bytes and issues its TMA loads (A one 128 x 64 box, B two 64 x 64
// boxes: MN-major, 128-byte swizzled rows). Each consumer warpgroup waits
// for the stage's full phase, builds the two 64-bit shared-memory
// descriptors, runs 4 m64n128k16 wgmmas (the k steps advance the
// descriptors' start addresses: +2 for A's 32 bytes, +128 for B's 2048),
// commits them, waits until one group is pending and releases the previous
// slab's stage from its first thread. The accumulators stay in an LLVM
// struct through the K loop and are stored after wait_group 0.
// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=256 type=bf16 target=sm_90a wgmma=true block-m=128 block-n=128 block-k=64 warps-m=2 warps-n=1 stages=3" | FileCheck %s

// CHECK: gpu.func @matmul(%[[MA:.*]]: !llvm.ptr, %[[MB:.*]]: !llvm.ptr, %{{.*}}: memref<256x256xf32>) kernel
// CHECK-SAME: known_block_size = array<i32: 384, 1, 1>
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[TA:.*]] = builtin.unrealized_conversion_cast %[[MA]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<128x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: %[[TB:.*]] = builtin.unrealized_conversion_cast %[[MB]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: %[[FULL:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>
// CHECK: %[[EMPTY:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>
// CHECK: nvgpu.mbarrier.init %[[FULL]][%{{.*}}], %c1{{[_0-9]*}}, predicate =
// CHECK: nvgpu.mbarrier.init %[[EMPTY]][%{{.*}}], %c2{{[_0-9]*}}, predicate =
// CHECK: nvgpu.mbarrier.init %[[FULL]]
// CHECK: nvgpu.mbarrier.init %[[EMPTY]]
// CHECK: nvgpu.mbarrier.init %[[FULL]]
// CHECK: nvgpu.mbarrier.init %[[EMPTY]]
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: gpu.barrier
// The tiles start at the dynamic shared memory rounded up to 1024 bytes.
// CHECK: %[[DYN:.*]] = gpu.dynamic_shared_memory
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[DYN]]
// CHECK: %[[UP:.*]] = arith.addi %[[BASE]], %c1023
// CHECK: arith.andi %[[UP]], %c-1024
// The producer: warpgroup 2's thread 256, 4 slabs into 3 stages of 32768 bytes.
// CHECK: %[[WG:.*]] = arith.shrui %[[TID]], %c7
// CHECK: %[[PRODUCES:.*]] = arith.cmpi eq, %[[WG]], %c2
// CHECK: scf.if %[[PRODUCES]] {
// CHECK: arith.cmpi eq, %[[TID]], %c256
// CHECK: scf.for %[[KT:.*]] = %{{.*}} to %c4
// CHECK: %[[STAGE:.*]] = arith.remui %[[KT]], %c3
// CHECK: %[[REUSE:.*]] = arith.cmpi uge, %[[KT]], %c3
// CHECK: scf.if %[[REUSE]] {
// CHECK: nvgpu.mbarrier.try_wait.parity %[[EMPTY]][%[[STAGE]]]
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[FULL]][%[[STAGE]]], %c32768
// CHECK: nvgpu.tma.async.load %[[TA]][{{.*}}], %[[FULL]][%[[STAGE]]]
// CHECK: nvgpu.tma.async.load %[[TB]][{{.*}}], %[[FULL]][%[[STAGE]]]
// CHECK: nvgpu.tma.async.load %[[TB]][{{.*}}], %[[FULL]][%[[STAGE]]]
// The consumers.
// CHECK: } else {
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (!llvm.struct<(f32,
// CHECK: nvgpu.mbarrier.try_wait.parity %[[FULL]]
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
// CHECK-NOT: gpu.barrier
// CHECK: arith.andi %[[TID]], %c127
// CHECK: scf.if
// CHECK: nvgpu.mbarrier.arrive %[[EMPTY]]
// CHECK: scf.yield
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.extractvalue
// CHECK: vector.store {{.*}} : memref<256x256xf32>, vector<2xf32>
// CHECK: gpu.return
