// A cross-entropy is a row kernel of its own: nova-gpu-threads gives f32
// rows of 32 classes or more a warp each, narrower or f64 rows a thread
// each, like LayerNorm's. A forward and backward of the same logits and
// labels share the rows' max and sum (nova-share-row-statistics, part of
// nova-lower-to-kernels).
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @loss
// CHECK: nova.launch @kernels::@k0(
// CHECK-NEXT: nova.launch @kernels::@k1(
// CHECK-NEXT: nova.launch @kernels::@k2(
// CHECK-NEXT: nova.launch @kernels::@k3(
// CHECK: func.func @k0({{.*}}"threads: 64 cross-entropy rows of 100, a warp each {{.*}} over 8 blocks of 256"
// CHECK-NEXT: nova.cross_entropy_kernel ins({{.*}} : memref<64x100xf32>, memref<64xi32>) outs({{.*}} : memref<64xf32>, memref<64x2xf32>)
// CHECK: func.func @k1({{.*}}"threads: 64 cross-entropy rows of 100, a warp each
// CHECK-NEXT: nova.cross_entropy_kernel ins({{.*}} : memref<64x100xf32>, memref<64xi32>, memref<64xf32>, memref<64x2xf32>) {{.*}} {backward}
// CHECK: func.func @k2({{.*}}"threads: 64 cross-entropy rows of 100, a warp each
// CHECK-NEXT: nova.cross_entropy_kernel ins({{.*}} : memref<64x100xf32>, memref<64xi32>, memref<64xf32>) {{.*}} {backward}
// CHECK: func.func @k3({{.*}}"threads: 6 cross-entropy rows of 20 (one unit a thread) over 1 blocks of 32"

// The forward's warp: each lane's max over its columns (every 32nd, from
// -inf), a butterfly of maxima; then its sum of exp(x - max), a butterfly
// of sums; the loss log(s) - (x[y] - max), 0 for a label outside [0, 100),
// stored by the row's first lane.
// GPU: gpu.func @nova_k0(%[[X:[^:]*]]: memref<64x100xf32>, %[[Y:[^:]*]]: memref<64xi32>, %[[L:[^:]*]]: memref<64xf32>, %[[S:[^:]*]]: memref<64x2xf32>) kernel
// GPU: %[[LANE:.*]] = arith.remui %{{.*}}, %c32
// GPU: scf.for {{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (f32)
// GPU: arith.maximumf
// GPU-COUNT-5: gpu.shuffle  xor
// GPU: math.exp
// GPU: arith.addf
// GPU-COUNT-5: gpu.shuffle  xor
// GPU: memref.load %[[Y]]
// GPU: %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %c100
// GPU: math.log
// GPU: arith.select %[[IN]]
// GPU: arith.cmpi eq, %[[LANE]], %c0
// GPU: scf.if
// GPU-NEXT: memref.store {{.*}}, %[[L]]
// GPU-NEXT: memref.store {{.*}}, %[[S]][{{.*}}, %c0
// GPU-NEXT: memref.store {{.*}}, %[[S]][{{.*}}, %c1
// GPU: gpu.return
// Its backward's warp reads the row's max and sum the forward stored (no
// shuffles), then each lane's columns exp(x - max) g / s minus g at the
// label's column, each element stored once.
// GPU: gpu.func @nova_k1(
// GPU-NOT: gpu.shuffle
// GPU: memref.load %{{.*}}[%{{.*}}, %c0{{.*}}] : memref<64x2xf32>
// GPU: memref.load %{{.*}}[%{{.*}}, %c1{{.*}}] : memref<64x2xf32>
// GPU-NOT: gpu.shuffle
// GPU: arith.divf
// GPU: scf.for
// GPU: arith.cmpi eq
// GPU: math.exp
// GPU: arith.subf
// GPU: memref.store
// GPU-NOT: memref.store
// GPU: gpu.return
// A backward with no forward of its labels: the max and sum again.
// GPU: gpu.func @nova_k2(
// GPU-COUNT-10: gpu.shuffle  xor
// GPU: arith.divf
// GPU: gpu.return
// f64 rows of 20: a thread each, no shuffles.
// GPU: gpu.func @nova_k3(
// GPU-NOT: gpu.shuffle
// GPU: gpu.return
func.func @loss(%x: tensor<64x100xf32>, %y: tensor<64xi32>, %g: tensor<64xf32>, %z: tensor<6x20xf64>, %yz: tensor<6xi64>,
                 %y2: tensor<64xi32>) -> (tensor<64xf32>, tensor<64x100xf32>, tensor<64x100xf32>, tensor<6xf64>) {
  %0 = nova.cross_entropy %x, %y : tensor<64x100xf32>, tensor<64xi32>
  %1 = nova.cross_entropy_grad %x, %y, %g : tensor<64x100xf32>, tensor<64xi32>, tensor<64xf32>
  %3 = nova.cross_entropy_grad %x, %y2, %g : tensor<64x100xf32>, tensor<64xi32>, tensor<64xf32>
  %2 = nova.cross_entropy %z, %yz : tensor<6x20xf64>, tensor<6xi64>
  return %0, %1, %3, %2 : tensor<64xf32>, tensor<64x100xf32>, tensor<64x100xf32>, tensor<6xf64>
}
