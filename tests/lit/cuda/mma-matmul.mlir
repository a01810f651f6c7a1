// The mma.sync matmul kernel (target/cuda/MmaMatmulKernel.cpp), written lane
// by lane: each thread's 16-byte cp.async copies into XOR-swizzled dynamic
// shared memory, a 3-deep pipeline with one barrier a slab (wait until at
// most 1 group is pending, a barrier, then refill the stage the previous
// iteration read), ldmatrix x4 for A and x4.trans for B, 16x8x16 MMAs on
// 2x2 f32 accumulators carried through the K loop, and each lane's rows of
// the result stored. Then its PTX for sm_80, sm_86 and sm_90a, assembled by
// ptxas.
// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=256 type=f16 block-m=128 block-n=128 block-k=32 warps-m=2 warps-n=2 stages=3" | FileCheck %s --check-prefix=IR

// IR-LABEL: gpu.module @nova_kernels
// IR: gpu.func @matmul(%{{.*}}: memref<256x256xf16>, %{{.*}}: memref<256x256xf16>, %{{.*}}: memref<256x256xf32>) kernel
// IR-SAME: known_block_size = array<i32: 128, 1, 1>
// IR-SAME: known_grid_size = array<i32: 2, 2, 1>
// IR: gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// IR: memref.view {{.*}} to memref<3x128x32xf16, #gpu.address_space<workgroup>>
// IR: memref.view {{.*}} to memref<3x32x128xf16, #gpu.address_space<workgroup>>
// The swizzle: chunk ^ ((row >> 1) & 3) for A's 64-byte rows.
// IR: arith.shrui
// IR: arith.andi
// IR: arith.xori
// Prologue: slabs 0 and 1, a group each.
// IR: nvgpu.device_async_copy {{.*}}, 8 {bypassL1} : memref<256x256xf16> to memref<3x128x32xf16, #gpu.address_space<workgroup>>
// IR: nvgpu.device_async_create_group
// IR: nvgpu.device_async_create_group
// The refill: slab kt + 2 while there is one, else slab kt's address and a
// source size of 0 (nothing copied, no branch).
// IR: scf.for
// IR-NOT: scf.if
// IR: %[[LIVE:.*]] = arith.cmpi ult
// IR: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// IR-NEXT: gpu.barrier
// IR: arith.select %[[LIVE]]
// IR: %[[SIZE:.*]] = arith.select %[[LIVE]], %c8{{.*}}, %c0{{.*}} : index
// IR: nvgpu.device_async_copy {{.*}}, 8, %[[SIZE]] {bypassL1}
// IR: nvgpu.device_async_create_group
// IR-NOT: gpu.barrier
// IR: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<3x128x32xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// IR: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<3x32x128xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// IR: vector.extract_strided_slice {{.*}} {offsets = [2, 0], sizes = [2, 2], strides = [1, 1]}
// IR: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// IR-NOT: gpu.barrier
// IR: scf.yield
// IR: vector.store {{.*}} : memref<256x256xf32>, vector<2xf32>
// IR: gpu.return

// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=256 type=tf32 block-m=128 block-n=128 block-k=16 warps-m=2 warps-n=2 stages=2" | FileCheck %s --check-prefix=TF32
// tf32: A by ldmatrix on 32-bit words, B by scalar shared loads (no b32
// .trans), the MMA marked tf32; 2 stages wait for no pending group.
// TF32: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// TF32: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<2x128x16xf32, #gpu.address_space<workgroup>> -> vector<4x1xf32>
// TF32: memref.load {{.*}} : memref<2x16x128xf32, #gpu.address_space<workgroup>>
// TF32: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>

// RUN: nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=256 type=bf16 block-m=128 block-n=128 block-k=32 warps-m=2 warps-n=2 stages=2" | FileCheck %s --check-prefix=BF16
// bf16: the MMA intrinsic on i32 registers (MLIR 19's nvgpu.mma.sync cannot
// type bf16 operands).
// BF16: vector.bitcast {{.*}} : vector<2xbf16> to vector<1xi32>
// BF16: llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"({{.*}}) : (i32, i32, i32, i32, i32, i32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>

// Edge tiles: copies past the matrix are zero-filled (a source size of 0
// elements, from a valid address), results past it not stored.
// RUN: nova-opt %s --nova-test-mma-matmul="m=200 n=72 k=40 type=f16 block-m=128 block-n=64 block-k=32 warps-m=2 warps-n=2 stages=2" | FileCheck %s --check-prefix=EDGE
// EDGE: known_grid_size = array<i32: 2, 2, 1>
// EDGE: %[[N:.*]] = arith.select %{{.*}}, %c8{{.*}}, %c0{{.*}} : index
// EDGE: nvgpu.device_async_copy {{.*}}, 8, %[[N]] {bypassL1}
// EDGE: scf.if
// EDGE: vector.store
// EDGE: } else {
// EDGE: scf.if
// EDGE: memref.store

// A row that is not a whole number of 16-byte chunks is refused, by name.
// RUN: not nova-opt %s --nova-test-mma-matmul="m=256 n=256 k=201 type=f16 block-m=128 block-n=128 block-k=32 warps-m=2 warps-n=2 stages=2" 2>&1 | FileCheck %s --check-prefix=ODD
// ODD: error: the mma.sync matmul kernel matmul (256 x 256 x 201, batch 1, NN, f16, {{.*}}): each operand's contiguous extent (201 of the lhs, 256 of the rhs) must be a multiple of 8 elements

module {
}
