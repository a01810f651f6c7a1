// An f32 matmul at full precision (the simt kernel: the lhs's rows of 30
// floats are not whole 16-byte chunks, so 3xtf32 on the tensor cores
// cannot take it) and an elementwise op
// of its product are one kernel too (nova.gpu_epilogue): the kernel's zero
// fill is its accumulators' start, and each result goes through the op's
// body (here the bias add) before its one store, to the op's result: a
// thread's run of 4 adjacent columns one vector store (rows of 48 are
// whole runs), the run's bias one vector load. The product is never stored: its buffer is gone, from the
// launch and the kernel (dropUnstoredProducts).
// RUN: env NOVA_TARGET=sm_86 nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s
// RUN: env NOVA_TARGET=sm_86 nova-opt %s -nova-lower-to-kernels -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_86}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @linear
// CHECK-NEXT: nova.launch @kernels::@[[K:k[0-9]+]](%arg0, %arg1, %arg2, %arg3)
// CHECK-NEXT: return
// CHECK: func.func @[[K]]({{.*}}nova.gpu_epilogue = array<i64: 3, 2>
// CHECK-SAME: "generated as the simt kernel over {{.*}}; the elementwise op after it fused (run on each result before its store)"
// CHECK-SAME: simt_matmul

// GPU: gpu.func @nova_[[K:k[0-9]+]](%arg0: memref<64x30xf32>, %arg1: memref<30x48xf32>, %arg2: memref<48xf32>, %arg3: memref<64x48xf32>) kernel
// GPU-NOT: linalg.fill
// GPU-NOT: memref.alloc
// GPU: scf.for
// GPU: gpu.barrier
// GPU: %[[BV:.*]] = vector.load %arg2[%{{.*}}] : memref<48xf32>, vector<4xf32>
// GPU: %[[B:.*]] = vector.extract %[[BV]][0] : f32 from vector<4xf32>
// GPU: %[[S:.*]] = arith.addf %{{.*}}, %[[B]] : f32
// GPU-COUNT-3: arith.addf
// GPU: %[[V:.*]] = vector.insert %[[S]], %{{.*}} [0] : f32 into vector<4xf32>
// GPU: vector.store %{{.*}}, %arg3[%{{.*}}, %{{.*}}] : memref<64x48xf32>, vector<4xf32>
// GPU-NOT: memref.alloc
// GPU: gpu.return
func.func @linear(%x: tensor<64x30xf32>, %w: tensor<30x48xf32>, %b: tensor<48xf32>) -> tensor<64x48xf32> {
  %0 = nova.matmul %x, %w : tensor<64x30xf32>, tensor<30x48xf32>
  %1 = nova.broadcast %b : tensor<48xf32> -> tensor<64x48xf32>
  %2 = nova.add %0, %1 : tensor<64x48xf32>, tensor<64x48xf32>
  return %2 : tensor<64x48xf32>
}
