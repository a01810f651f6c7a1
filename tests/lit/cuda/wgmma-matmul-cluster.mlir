// The persistent Hopper matmul kernel in clusters of 2 CTAs along M: 4
// blocks (2 clusters) for the 4 cluster tiles (256 x 128: two 128-row
// tiles, one a CTA) of a 512 x 256 result. Each CTA loads its A tile and
// half of the B tile the two share (64 of its 128 columns: one of its two
// 64-column boxes), multicast into both (mask 0b11); a stage's `empty` is
// an mbarrier of the NVVM pointer ops after the tiles, counting both CTAs'
// consumer warpgroups (2 x 2), and each release arrives in both CTAs
// (mapa + mbarrier.arrive.release.cluster). Cluster barriers follow the
// inits and precede the exit. Its PTX through ptxas: PTX below.
// RUN: nova-opt %s --nova-test-mma-matmul="m=512 n=256 k=256 type=bf16 target=sm_90a wgmma=true block-m=128 block-n=128 block-k=64 warps-m=2 warps-n=1 stages=3 persistent-blocks=4 cluster-m=2" | FileCheck %s
// REQUIRES: ptxas
// RUN: nova-opt %s --nova-test-mma-matmul="m=512 n=256 k=256 type=bf16 target=sm_90a wgmma=true block-m=128 block-n=128 block-k=64 warps-m=2 warps-n=1 stages=3 persistent-blocks=4 cluster-m=2" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin

// CHECK: gpu.func @matmul(
// CHECK-SAME: known_grid_size = array<i32: 4, 1, 1>
// CHECK-SAME: nova.cluster_dims = array<i32: 2, 1, 1>
// CHECK: %[[RANK32:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK: %[[RANK:.*]] = arith.index_cast %[[RANK32]] : i32 to index
// CHECK: %[[FULL:.*]] = nvgpu.mbarrier.create
// CHECK-NOT: nvgpu.mbarrier.create
// The three `empty` mbarriers after the 3 stages of 32 KiB: 2 x 2 arrivals.
// CHECK: nvgpu.mbarrier.init %[[FULL]]
// CHECK: %[[COUNT:.*]] = arith.constant 4 : i32
// CHECK: %[[E0:.*]] = llvm.inttoptr %{{.*}} : i32 to !llvm.ptr<3>
// CHECK: nvvm.mbarrier.init.shared %[[E0]], %[[COUNT]], predicate = %{{.*}}
// CHECK: nvvm.fence.mbarrier.init
// CHECK: gpu.barrier
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// The producer: clusters' tiles 2 apart, from blockIdx.x / 2; its rows
// 128 x rank further; waits on its `empty`, loads A alone and its half of
// B multicast.
// CHECK: %[[BX:.*]] = gpu.block_id x
// CHECK: %[[FIRST:.*]] = arith.shrui %[[BX]], %c1
// CHECK: scf.for %{{.*}} = %[[FIRST]] to %c4 step %c2
// CHECK: arith.muli %[[RANK]], %c128
// CHECK: %[[PARITY:.*]] = arith.extui %{{.*}} : i1 to i32
// CHECK: %[[EMPTY:.*]] = llvm.inttoptr %{{.*}} : i32 to !llvm.ptr<3>
// CHECK: nvvm.mbarrier.try_wait.parity.shared %[[EMPTY]], %[[PARITY]]
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[FULL]]
// CHECK: nvgpu.tma.async.load {{.*}} -> memref<128x64xbf16, #gpu.address_space<workgroup>>
// B's box (64 columns) at 8192 x rank bytes into the tile, its columns 64 x rank on.
// CHECK: arith.muli %[[RANK]], %c8192
// CHECK: arith.muli %[[RANK]], %c64
// CHECK: %[[MASK:.*]] = arith.constant 3 : i16
// CHECK: nvgpu.tma.async.load {{.*}} multicast_mask = %[[MASK]] {{.*}} -> memref<64x64xbf16, #gpu.address_space<workgroup>>
// The consumers' release of a stage: in CTA 0 and CTA 1.
// CHECK: } else {
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: llvm.inline_asm has_side_effects {{.*}}mapa.shared::cluster.u32{{.*}}mbarrier.arrive.release.cluster.shared::cluster.b64
// CHECK: llvm.inline_asm has_side_effects {{.*}}mapa.shared::cluster.u32
// The exit waits for the cluster.
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-NEXT: gpu.return

// PTX: .entry matmul(
// PTX: mov.u32 {{.*}}, %cluster_ctarank;
// PTX: mbarrier.init.shared.b64
// PTX: barrier.cluster.arrive.aligned;
// PTX: barrier.cluster.wait.aligned;
// PTX: mbarrier.try_wait.parity.shared.b64
// PTX: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster
// PTX: mapa.shared::cluster.u32
// PTX: mbarrier.arrive.release.cluster.shared::cluster.b64
// PTX: barrier.cluster.arrive.aligned;
// PTX: barrier.cluster.wait.aligned;
module {
}
