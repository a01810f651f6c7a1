// The persistent Hopper matmul kernel: 3 blocks for the 8 tiles of a 512 x
// 256 result (128 x 128 tiles, column fastest). Each role loops over its
// block's tiles (blockIdx.x, + 3, ... < 8), counting the slabs its
// pipeline ran before each tile: a slab's stage and phase follow that
// running count, so the producer goes on into the next tile's 4 slabs
// while the consumers store the present one. The consumers release the
// tile's last stage after wait_group 0 (a block a tile simply ends).
// RUN: nova-opt %s --nova-test-mma-matmul="m=512 n=256 k=256 type=bf16 target=sm_90a wgmma=true block-m=128 block-n=128 block-k=64 warps-m=2 warps-n=1 stages=3 persistent-blocks=3" | FileCheck %s
// (Its PTX and ptxas: wgmma-matmul-ptx.mlir, PERSIST.)

// CHECK: gpu.func @matmul(
// CHECK-SAME: known_grid_size = array<i32: 3, 1, 1>
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[FULL:.*]] = nvgpu.mbarrier.create
// CHECK: %[[EMPTY:.*]] = nvgpu.mbarrier.create
// The producer: tiles 3 apart, the slabs before each tile carried.
// CHECK: scf.if
// CHECK: %[[PB:.*]] = gpu.block_id x
// CHECK: scf.for %[[T:.*]] = %[[PB]] to %c8 step %c3 iter_args(%[[USED:.*]] = %{{.*}}) -> (index)
// Tile t: column t & 1, row t >> 1.
// CHECK: arith.andi %[[T]], %c1
// CHECK: arith.shrui %[[T]], %c1
// CHECK: scf.for %[[KT:.*]] = %{{.*}} to %c4
// CHECK: %[[USE:.*]] = arith.addi %[[USED]], %[[KT]] : index
// CHECK: %[[STAGE:.*]] = arith.remui %[[USE]], %c3
// CHECK: arith.cmpi uge, %[[USE]], %c3
// CHECK: nvgpu.mbarrier.try_wait.parity %[[EMPTY]][%[[STAGE]]]
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[FULL]][%[[STAGE]]]
// CHECK: nvgpu.tma.async.load
// CHECK: %[[NEXT:.*]] = arith.addi %[[USED]], %c4 : index
// CHECK-NEXT: scf.yield %[[NEXT]] : index
// The consumers: the same tiles; the accumulators start from zero each tile.
// CHECK: } else {
// CHECK: %[[ZERO:.*]] = llvm.mlir.zero
// CHECK: %[[CB:.*]] = gpu.block_id x
// CHECK: scf.for %{{.*}} = %[[CB]] to %c8 step %c3 iter_args(%[[CUSED:.*]] = %{{.*}}) -> (index)
// CHECK: scf.for %[[CKT:.*]] = %{{.*}} to %c4 {{.*}} iter_args(%{{.*}} = %[[ZERO]])
// CHECK: %[[CUSE:.*]] = arith.addi %[[CUSED]], %[[CKT]] : index
// CHECK: arith.remui %[[CUSE]], %c3
// CHECK: nvgpu.mbarrier.try_wait.parity %[[FULL]]
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: arith.subi %[[CUSE]], %c1
// CHECK: nvgpu.mbarrier.arrive %[[EMPTY]]
// The tile's last slab released once its wgmmas are done, then the epilogue.
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: %[[LAST:.*]] = arith.addi %[[CUSED]], %{{.*}} : index
// CHECK: %[[LSTAGE:.*]] = arith.remui %[[LAST]], %c3
// CHECK: nvgpu.mbarrier.arrive %[[EMPTY]][%[[LSTAGE]]]
// CHECK: vector.store {{.*}} : memref<512x256xf32>, vector<2xf32>
// CHECK: %[[CNEXT:.*]] = arith.addi %[[CUSED]], %c4 : index
// CHECK-NEXT: scf.yield %[[CNEXT]] : index
// CHECK: gpu.return
