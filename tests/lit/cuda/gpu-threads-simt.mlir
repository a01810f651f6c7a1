// An f32 matmul at full precision whose rhs rows (70 floats) are not whole
// 16-byte chunks (so 3xtf32 on the tensor cores cannot take it) becomes
// the simt kernel: configured with the GPU configurator's simt shape
// (simt_matmul, blocks along x, threads and dynamic shared memory recorded
// for the launch plan); the zero fill before it is dropped, kernel and
// launch, its value the accumulators' start (nova.gpu_output_init).
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @mm
// CHECK-NOT: @kernels::@k0_0
// CHECK: nova.launch @kernels::@k0_1(
// CHECK-NOT: func.func @k0_0(
// CHECK: func.func @k0_1({{.*}}nova.gpu_block_threads = [[T:[0-9]+]] : i64, nova.gpu_operand = "f32", nova.gpu_output_init = 0.000000e+00 : f32, nova.gpu_shared_bytes = [[S:[0-9]+]] : i64
// CHECK-SAME: "generated as the simt kernel over [[B:[0-9]+]] blocks of [[T]] threads
// CHECK-SAME: the mma.sync kernel does not take it (the mma.sync matmul kernel trial (100 x 70 x 40, batch 1, NN, 3xtf32, {{.*}}): each operand's contiguous extent (40 of the lhs, 70 of the rhs) must be a multiple of 4 elements (16-byte copies))
// CHECK-SAME: #nova.lowering_config<simt_matmul, workgroups = [[B]], tile = [{{[0-9]+}}, {{[0-9]+}}], cache_tile = [16, 2, 1]

// The kernel, double-buffered: slab 0 of both operands into shared buffer 0
// (the lhs tiles first, the rhs 16-byte aligned after them), a barrier;
// then for each slab: the next slab's loads from global memory (into
// registers, under a uniform `more slabs` branch), this slab folded into
// the accumulators from buffer slab % 2 (each thread's runs of 4 rows and
// of 4 columns one vector<4xf32> read each, the tiles' rows padded by 4 so
// that the runs stay 16-byte aligned, as the kernel promises:
// nova.aligned_vectors), the next slab stored to the other buffer, one
// barrier; stores guarded by the result's extents. The lhs's rows (40
// floats) are whole 16-byte units: its slabs come in 4 floats a load
// (vector.load, ld.global.v4.f32), K contiguous, so each goes to 4 rows
// of its tile, K row k = 4j + e to tile row 2j + (e & 1) + 8 (e >> 1) (so
// that a warp's stores hit distinct banks; both tiles in that order); the
// rhs's rows (70) are not: a float a load.
// GPU: gpu.func @nova_k0_1(%[[C:.*]]: memref<100x70xf32>, %[[A:.*]]: memref<100x40xf32>, %[[W:.*]]: memref<40x70xf32>) kernel
// GPU-SAME: known_block_size = array<i32: [[T:[0-9]+]], 1, 1>
// GPU-SAME: nova.aligned_vectors
// GPU: gpu.thread_id x
// GPU: gpu.block_id x
// GPU: gpu.dynamic_shared_memory
// GPU: memref.view {{.*}} to memref<2x16x{{[0-9]+}}xf32, #gpu.address_space<workgroup>>
// GPU: memref.view {{.*}} to memref<2x16x{{[0-9]+}}xf32, #gpu.address_space<workgroup>>
// GPU: vector.load %[[A]]{{.*}} : memref<100x40xf32>, vector<4xf32>
// GPU: memref.load %[[W]]
// GPU: %[[E:.*]] = vector.extract %{{.*}}[1] : f32 from vector<4xf32>
// GPU: %[[K1:.*]] = arith.addi %[[KK:.*]], %c1
// GPU: arith.shrui %[[K1]], %c2
// GPU: arith.addi
// GPU-NEXT: %[[ROW:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// GPU-NEXT: memref.store %[[E]], %{{.*}}[%c0, %[[ROW]], %{{.*}}] : memref<2x16x{{[0-9]+}}xf32, #gpu.address_space<workgroup>>
// GPU: gpu.barrier
// GPU: scf.for
// GPU: scf.if {{.*}} -> (vector<4xf32>,
// GPU: vector.load %[[A]]
// GPU: memref.load %[[W]]
// GPU: arith.remui
// GPU: scf.for
// GPU: vector.load {{.*}} : memref<2x16x{{[0-9]+}}xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// GPU: vector.extract
// GPU: arith.mulf
// GPU: arith.addf
// GPU: scf.if
// GPU: memref.store
// GPU: gpu.barrier
// GPU: arith.cmpi ult, {{.*}}, %c100
// GPU: memref.store {{.*}}, %[[C]]
// GPU: gpu.return
func.func @mm(%x: tensor<100x40xf32>, %w: tensor<40x70xf32>) -> tensor<100x70xf32> {
  %0 = nova.matmul %x, %w : tensor<100x40xf32>, tensor<40x70xf32>
  return %0 : tensor<100x70xf32>
}
