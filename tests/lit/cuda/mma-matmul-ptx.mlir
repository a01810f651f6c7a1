// PTX of the mma.sync matmul kernel for each operand type, from MLIR's
// gpu-lower-to-nvvm-pipeline (what target/cuda/PtxEmitter.cpp runs), and
// ptxas accepting it for sm_80, sm_86 and sm_90a.
// REQUIRES: ptxas
// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=256 type=f16 block-m=128 block-n=128 block-k=32 warps-m=2 warps-n=2 stages=3" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-features=+ptx76 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.f16.ptx
// RUN: FileCheck %s --check-prefix=F16 < %t.f16.ptx
// RUN: %ptxas -arch=sm_80 %t.f16.ptx -o %t.f16.sm_80.cubin
// RUN: %ptxas -arch=sm_86 %t.f16.ptx -o %t.f16.sm_86.cubin
// RUN: %ptxas -arch=sm_90a %t.f16.ptx -o %t.f16.sm_90a.cubin
// F16: .target sm_80
// F16: .entry matmul(
// F16-NEXT: .param .u64
// F16-NEXT: .param .u64
// F16-NEXT: .param .u64
// F16: .shared .align 16 .b8 __dynamic_shmem__0
// F16: xor.b64
// F16: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16;
// F16: cp.async.commit_group;
// One barrier a slab: slab kt has landed when one group (S - 2) is pending;
// after the barrier the stage read in the previous iteration is refilled,
// zero-filling (source size 0) past the last slab, with no branch.
// F16: cp.async.wait_group 1;
// F16-NEXT: bar.sync{{[[:space:]]+}}0;
// F16-NOT: bar.sync
// F16: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16, %r{{[0-9]+}};
// F16: cp.async.commit_group;
// F16-NOT: bar.sync
// F16: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// F16: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// F16: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=256 type=bf16 block-m=128 block-n=128 block-k=32 warps-m=2 warps-n=2 stages=2" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-features=+ptx76 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.bf16.ptx
// RUN: FileCheck %s --check-prefix=BF16 < %t.bf16.ptx
// RUN: %ptxas -arch=sm_80 %t.bf16.ptx -o %t.bf16.sm_80.cubin
// RUN: %ptxas -arch=sm_86 %t.bf16.ptx -o %t.bf16.sm_86.cubin
// RUN: %ptxas -arch=sm_90a %t.bf16.ptx -o %t.bf16.sm_90a.cubin
// BF16: cp.async.wait_group 0;
// BF16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32

// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=256 type=tf32 block-m=128 block-n=128 block-k=16 warps-m=2 warps-n=2 stages=2" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.tf32.ptx
// RUN: FileCheck %s --check-prefix=TF32 < %t.tf32.ptx
// RUN: %ptxas -arch=sm_90a %t.tf32.ptx -o %t.tf32.sm_90a.cubin
// TF32: .target sm_90a
// TF32: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// TF32: ld.shared.u32
// TF32: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32

// 3xtf32 (f32 at about f32's accuracy): each fragment element x becomes
// big = x rounded to tf32 (add 0x1000 to the bits, clear the low 13) and
// small = (x - big) rounded the same way; three MMAs a tile, the small
// terms first. 2x2 warps of 64x64: 32 tiles a warp, 2 k steps a slab of
// 16, so 192 MMAs in the loop. Registers fit without spilling.
// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=256 type=3xtf32 block-m=128 block-n=128 block-k=16 warps-m=2 warps-n=2 stages=3" --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-features=+ptx76 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.x3.ptx
// RUN: FileCheck %s --check-prefix=X3 < %t.x3.ptx
// RUN: grep -c 'mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32' %t.x3.ptx | FileCheck %s --check-prefix=X3-COUNT
// RUN: %ptxas -arch=sm_80 -v %t.x3.ptx -o %t.x3.sm_80.cubin 2>&1 | FileCheck %s --check-prefix=X3-REGS
// RUN: %ptxas -arch=sm_86 %t.x3.ptx -o %t.x3.sm_86.cubin
// RUN: %ptxas -arch=sm_90a %t.x3.ptx -o %t.x3.sm_90a.cubin
// X3: .target sm_80
// X3: ld.shared.f32
// X3: add.s32 [[BITS:%r[0-9]+]], %r{{[0-9]+}}, 4096;
// X3-NEXT: and.b32 %r{{[0-9]+}}, [[BITS]], -8192;
// X3: sub.rn.f32
// X3: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// X3-COUNT: 192
// X3-REGS: 0 bytes spill stores, 0 bytes spill loads

// A fused epilogue (scale, bias, GELU, residual) and transposed operands;
// tanh as an inline polynomial and abs as a sign mask (nova-gpu-inline-math,
// as PtxEmitter.cpp runs it), so the PTX calls no libdevice function.
// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=256 type=bf16 block-m=128 block-n=128 block-k=32 warps-m=2 warps-n=2 stages=2 transpose-a=1 transpose-b=1 scale=0.5 bias=1 activation=gelu residual=1" --nova-gpu-inline-math --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-features=+ptx76 cubin-format=isa opt-level=3 kernel-bare-ptr-calling-convention=true" 2>/dev/null | %extract-ptx > %t.epi.ptx
// RUN: FileCheck %s --check-prefix=EPI < %t.epi.ptx
// RUN: %ptxas -arch=sm_80 %t.epi.ptx -o %t.epi.sm_80.cubin
// EPI-NOT: .extern .func
// EPI: .entry matmul(
// EPI-NEXT: .param .u64
// EPI-NEXT: .param .u64
// EPI-NEXT: .param .u64
// EPI-NEXT: .param .u64
// EPI-NEXT: .param .u64
// EPI: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// EPI: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// EPI: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// EPI: ld.global{{.*}}.f32
// EPI: st.global

module {
}
