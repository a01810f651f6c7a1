// The CUDA target's general kernel form. nova-gpu-threads splits a kernel of
// several compute ops (the matmul's fill, the matmul, its epilogue) into one
// kernel each, launched in order, and shares each one's units of work out
// over blocks of threads; a sum to a scalar has no parallel loop and runs
// on one block, combined in shared memory; the matmul is the simt kernel.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each | FileCheck %s
// nova-gpu-map-threads and nova-gpu-outline-kernels then make each one a
// gpu.func whose units are spread over the grid, guarded by unit < units.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @mlp
// The matmul's zero fill is gone (the simt kernel starts from it:
// gpu-threads-simt.mlir); its epilogue is fused into the sum.
// CHECK-NOT: @kernels::@k0_0
// CHECK: nova.launch @kernels::@k0_1(
// CHECK-NEXT: nova.launch @kernels::@k1(
// CHECK-NEXT: nova.launch @kernels::@k2(
// CHECK-NEXT: nova.launch @kernels::@k3(
// CHECK: func.func @k0_1({{.*}}#nova.lowering_config<simt_matmul
// CHECK: linalg.generic {{.*}}nova.kernel = "matmul"
// A 0-d fill: one thread. The epilogue fused into the sum: one block.
// CHECK: func.func @k1({{.*}}"threads: no parallel loop (one thread) over 1 blocks of 1"{{.*}}#nova.lowering_config<gpu_threads, workgroups = 1, tile = [1]
// CHECK-NEXT: arith.constant
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: return
// CHECK: func.func @k2({{.*}}nova.gpu_shared_bytes = 1024 : i64, nova.gpu_why = ["threads: a reduction of 600 points (each thread's points folded in shared memory, then a tree) over 1 blocks of 256"]
// CHECK-SAME: #nova.lowering_config<gpu_threads, workgroups = 1, tile = [256]
// An elementwise op: a thread per 4 adjacent points (rows of 8: whole
// 16-byte vectors; gpu-threads-vector-points.mlir).
// CHECK: func.func @k3({{.*}}"threads: 1600 points of its parallel loops in units of 4 adjacent ones (one vector access of each operand along them) (one unit a thread) over 2 blocks of 256"{{.*}}#nova.lowering_config<gpu_threads, workgroups = 2, tile = [256]

// GPU: module @kernels attributes {gpu.container_module}
// GPU: gpu.module @nova_kernels
// GPU: gpu.func @nova_k1(
// GPU-SAME: known_block_size = array<i32: 1, 1, 1>
// GPU: arith.cmpi eq
// GPU: scf.if
// The tree: 8 levels (128 ... 1), a barrier after the points and after each.
// GPU: gpu.func @nova_k2(
// GPU-SAME: known_block_size = array<i32: 256, 1, 1>
// GPU: gpu.dynamic_shared_memory
// GPU: memref.view {{.*}} to memref<256xf32, #gpu.address_space<workgroup>>
// GPU-COUNT-9: gpu.barrier
// GPU-NOT: gpu.barrier
// GPU: gpu.return
// GPU: gpu.func @nova_k3(%{{.*}}: memref<200x8xf32>, %{{.*}}: memref<200x8xf32>) kernel
// GPU-SAME: known_block_size = array<i32: 256, 1, 1>
// GPU: %[[T:.*]] = gpu.thread_id x
// GPU: %[[B:.*]] = gpu.block_id x
// GPU: %[[U:.*]] = arith.addi
// GPU: arith.cmpi ult, %[[U]], %c400
// GPU: scf.if
// GPU: vector.load
// GPU-COUNT-4: math.tanh
// GPU: vector.store
// GPU: gpu.return
func.func @mlp(%x: tensor<200x8xf32>, %w: tensor<8x3xf32>, %b: tensor<3xf32>) -> (tensor<200x3xf32>, tensor<f32>, tensor<200x8xf32>) {
  %0 = nova.matmul %x, %w : tensor<200x8xf32>, tensor<8x3xf32>
  %1 = nova.broadcast %b : tensor<3xf32> -> tensor<200x3xf32>
  %2 = nova.add %0, %1 : tensor<200x3xf32>, tensor<200x3xf32>
  %3 = nova.gelu %2 : tensor<200x3xf32>
  %4 = nova.reduce_sum %3 {axes = array<i64: 0, 1>} : tensor<200x3xf32>
  %5 = nova.tanh %x : tensor<200x8xf32>
  return %3, %4, %5 : tensor<200x3xf32>, tensor<f32>, tensor<200x8xf32>
}
