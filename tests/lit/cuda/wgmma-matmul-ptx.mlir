// PTX of the TMA + wgmma matmul kernel (sm_90a, +ptx80) for bf16 NN, f16
// TN (both operands read transposed by wgmma) and tf32 NT (K-major), from
// MLIR's gpu-lower-to-nvvm-pipeline, assembled by ptxas for sm_90a.
// REQUIRES: ptxas
// RUN: nova-opt %s --nova-test-mma-matmul="m=512 n=512 k=512 type=bf16 target=sm_90a wgmma=true block-m=128 block-n=128 block-k=64 warps-m=2 warps-n=1 stages=4" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.bf16.ptx
// RUN: FileCheck %s --check-prefix=BF16 < %t.bf16.ptx
// RUN: %ptxas -arch=sm_90a %t.bf16.ptx -o %t.bf16.cubin
// BF16: .target sm_90a
// BF16: .entry matmul(
// BF16: mbarrier.init.shared.b64
// BF16: fence.mbarrier_init.release.cluster;
// BF16: mbarrier.arrive.expect_tx.shared.b64
// BF16: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
// BF16: mbarrier.try_wait.parity.shared.b64
// BF16: wgmma.fence.sync.aligned;
// imm-scale-a, imm-scale-b, imm-trans-a (A K-major: 0), imm-trans-b (B N-contiguous: 1).
// BF16: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1,  1, 0,  1;
// BF16: wgmma.commit_group.sync.aligned;
// BF16: wgmma.wait_group.sync.aligned 1;
// BF16: wgmma.wait_group.sync.aligned 0;

// RUN: nova-opt %s --nova-test-mma-matmul="m=512 n=512 k=512 type=f16 transpose-a=true target=sm_90a wgmma=true block-m=128 block-n=256 block-k=64 warps-m=2 warps-n=1 stages=3" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.f16.ptx
// RUN: FileCheck %s --check-prefix=F16 < %t.f16.ptx
// RUN: %ptxas -arch=sm_90a %t.f16.ptx -o %t.f16.cubin
// F16: wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {{.*}}, p, 1,  1, 1,  1;

// 192 columns (B three 64-column boxes a slab), as the configurator may
// take for a GPT's 768-column products.
// RUN: nova-opt %s --nova-test-mma-matmul="m=512 n=768 k=512 type=bf16 target=sm_90a wgmma=true block-m=128 block-n=192 block-k=64 warps-m=2 warps-n=1 stages=4" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.n192.ptx
// RUN: FileCheck %s --check-prefix=N192 < %t.n192.ptx
// RUN: %ptxas -arch=sm_90a %t.n192.ptx -o %t.n192.cubin
// N192: wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {{.*}}, p, 1,  1, 0,  1;

// Split-K (4 parts, the grid's z): each part's 16 slabs of K from slab
// 16 z, at most what is left of K.
// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=4096 type=bf16 transpose-a=true target=sm_90a wgmma=true block-m=128 block-n=128 block-k=64 warps-m=2 warps-n=1 stages=4 split-k=4" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.split.ptx
// RUN: FileCheck %s --check-prefix=SPLIT < %t.split.ptx
// RUN: %ptxas -arch=sm_90a %t.split.ptx -o %t.split.cubin
// SPLIT: mov.u32 {{.*}}, %ctaid.z;
// SPLIT: min.s64 {{.*}}, 16;
// SPLIT: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
// SPLIT: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16

// 3xtf32 (f32 at about f32's accuracy) on wgmma, NN (B N-contiguous): each
// raw f32 slab converted by the consumers into K-major big and small tiles
// (the rounding mask), fenced for the async proxy, then three tf32 wgmmas
// a k step: 12 a slab of 32.
// RUN: nova-opt %s --nova-test-mma-matmul="m=512 n=512 k=512 type=3xtf32 target=sm_90a wgmma=true block-m=128 block-n=128 block-k=32 warps-m=2 warps-n=1 stages=3" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.x3.ptx
// RUN: FileCheck %s --check-prefix=X3 < %t.x3.ptx
// RUN: grep -c 'wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32' %t.x3.ptx | FileCheck %s --check-prefix=X3-COUNT
// RUN: %ptxas -arch=sm_90a %t.x3.ptx -o %t.x3.cubin
// X3: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
// X3: and.b32 %r{{[0-9]+}}, %r{{[0-9]+}}, -8192;
// X3: fence.proxy.async.shared::cta;
// X3: wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32
// X3-COUNT: 12

// RUN: nova-opt %s --nova-test-mma-matmul="m=512 n=512 k=512 type=tf32 transpose-b=true target=sm_90a wgmma=true" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.tf32.ptx
// RUN: FileCheck %s --check-prefix=TF32 < %t.tf32.ptx
// RUN: %ptxas -arch=sm_90a %t.tf32.ptx -o %t.tf32.cubin
// TF32: wgmma.mma_async.sync.aligned.m64n{{[0-9]+}}k8.f32.tf32.tf32 {{.*}}, p, 1,  1;

// Persistent (3 blocks for 8 tiles, wgmma-matmul-persistent.mlir): the
// blocks step over the tiles by 3 (%nctaid is not read: the grid is the
// kernel's own); each tile's wgmmas, then (the loop rotated: wait_group
// 0 leads the tile's end) its stores.
// RUN: nova-opt %s --nova-test-mma-matmul="m=512 n=256 k=256 type=bf16 target=sm_90a wgmma=true block-m=128 block-n=128 block-k=64 warps-m=2 warps-n=1 stages=3 persistent-blocks=3" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.persist.ptx
// RUN: FileCheck %s --check-prefix=PERSIST < %t.persist.ptx
// RUN: %ptxas -arch=sm_90a %t.persist.ptx -o %t.persist.cubin
// PERSIST: mov.u32 {{.*}}, %ctaid.x;
// PERSIST: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
// PERSIST: add.s64 {{.*}}, 3;
// PERSIST: wgmma.wait_group.sync.aligned 0;
// PERSIST: st.global
// PERSIST: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
