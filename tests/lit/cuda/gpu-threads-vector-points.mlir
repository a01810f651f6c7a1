// Elementwise ops take 4 adjacent points of their innermost loop a thread
// where every operand along it is a whole buffer whose rows are whole
// vectors: one 16-byte load of each such operand, one scalar load of each
// that is constant along it (a row's scale), the body per point, one
// 16-byte store; the kernel promises its vectors aligned
// (nova.aligned_vectors). Rows of 30, or an operand read across the
// innermost loop (a transpose), keep a point a thread.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK: func.func @k0({{.*}}"threads: 8192 points of its parallel loops in units of 4 adjacent ones (one vector access of each operand along them) (one unit a thread) over 8 blocks of 256"

// GPU: gpu.func @nova_k0(%[[X:[^:]*]]: memref<64x128xf32>, %[[B:[^:]*]]: memref<128xf32>, %[[S:[^:]*]]: memref<64xf32>, %[[Y:[^:]*]]: memref<64x128xf32>) kernel
// GPU-SAME: nova.aligned_vectors
// GPU-DAG: %[[XV:.*]] = vector.load %[[X]][%{{.*}}, %{{.*}}] : memref<64x128xf32>, vector<4xf32>
// GPU-DAG: %[[BV:.*]] = vector.load %[[B]][%{{.*}}] : memref<128xf32>, vector<4xf32>
// GPU-DAG: memref.load %{{.*}}[%{{.*}}, %c0] : memref<64x1xf32>
// GPU-COUNT-4: arith.mulf
// GPU: vector.store %{{.*}}, %[[Y]][%{{.*}}, %{{.*}}] : memref<64x128xf32>, vector<4xf32>
// GPU-NOT: memref.store
// GPU: gpu.return
func.func @scaled(%x: tensor<64x128xf32>, %b: tensor<128xf32>, %s: tensor<64xf32>) -> tensor<64x128xf32> {
  %bb = nova.broadcast %b : tensor<128xf32> -> tensor<64x128xf32>
  %0 = nova.add %x, %bb : tensor<64x128xf32>, tensor<64x128xf32>
  %r = nova.reshape %s : tensor<64xf32> -> tensor<64x1xf32>
  %sb = nova.broadcast %r : tensor<64x1xf32> -> tensor<64x128xf32>
  %1 = nova.mul %0, %sb : tensor<64x128xf32>, tensor<64x128xf32>
  return %1 : tensor<64x128xf32>
}

// CHECK: func.func @k1({{.*}}"threads: 300 points of its parallel loops (one unit a thread) over
// GPU: gpu.func @nova_k1(
// GPU-NOT: vector.load
// GPU: gpu.return
// A step scaled by one value (a 0-d buffer, an optimizer's learning
// rate): read once a unit.
// CHECK: func.func @k2({{.*}}"threads: 512 points of its parallel loops in units of 4 adjacent ones
// GPU: gpu.func @nova_k2(%[[P:[^:]*]]: memref<512xf32>, %[[R:[^:]*]]: memref<f32>, %{{.*}}: memref<512xf32>)
// GPU-DAG: vector.load %[[P]]
// GPU-DAG: memref.load %[[R]][] : memref<f32>
// GPU: vector.store
// GPU: gpu.return
func.func @odd(%x: tensor<10x30xf32>) -> tensor<10x30xf32> {
  %0 = nova.exp %x : tensor<10x30xf32>
  return %0 : tensor<10x30xf32>
}

func.func @step(%p: tensor<512xf32>, %lr: tensor<f32>) -> tensor<512xf32> {
  %b = nova.broadcast %lr : tensor<f32> -> tensor<512xf32>
  %0 = nova.mul %p, %b : tensor<512xf32>, tensor<512xf32>
  return %0 : tensor<512xf32>
}
