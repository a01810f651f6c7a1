// RUN: nova-opt %s -nova-bucket-all-reduce=bucket-bytes=4096 -verify-each -split-input-file | FileCheck %s
// RUN: nova-opt %s -nova-bucket-all-reduce -verify-each -split-input-file | FileCheck %s --check-prefix=ONE

// A backward producing the gradients %g3 (k3), %g2 (k2, accumulated again by
// k4), %g1 (k5) and %g0 (k6), each 1,024 or 2,048 bytes, then the updates
// (k7..k10). In 4,096-byte buckets, in the order the gradients are produced:
// bucket 0 = %g3 (1,024) + %g2 (2,048), ready once k4 has run (k2's
// gradient is accumulated there); bucket 1 = %g1 (2,048) + %g0 (1,024),
// ready after k6. Each starts right after its last producer, while the
// backward goes on, and is waited for right before the first update that
// reads one of its sums; the nova.all_reduce ops and the view feeding one
// are gone.
// CHECK-LABEL: func.func @step
// CHECK: nova.launch @kernels::@k3(%[[G3:[a-z0-9_]+]])
// CHECK: nova.launch @kernels::@k2(%[[G2:[a-z0-9_]+]])
// CHECK-NEXT: nova.launch @kernels::@k4(%[[G2]])
// CHECK-NEXT: nova.all_reduce_start(%[[G3]], %[[G2]]) {bucket = 0 : i64} : memref<256xf32>, memref<512xf32>
// CHECK: nova.launch @kernels::@k5(%[[G1:[a-z0-9_]+]])
// CHECK: nova.launch @kernels::@k6(%[[G0:[a-z0-9_]+]])
// CHECK-NEXT: nova.all_reduce_start(%[[G1]], %[[G0]]) {bucket = 1 : i64} : memref<16x32xf32>, memref<256xf32>
// CHECK: nova.launch @kernels::@kloss
// CHECK-NEXT: nova.all_reduce_wait(%[[G3]], %[[G2]]) {bucket = 0 : i64}
// CHECK-NEXT: nova.launch @kernels::@k7(%arg0, %[[G2]])
// CHECK-NEXT: nova.launch @kernels::@k8(%arg0, %[[G3]])
// CHECK-NEXT: nova.all_reduce_wait(%[[G1]], %[[G0]]) {bucket = 1 : i64}
// CHECK-NEXT: nova.launch @kernels::@k9(%arg0, %[[G1]])
// CHECK-NEXT: nova.launch @kernels::@k10(%arg0, %[[G0]])
// CHECK-NOT: nova.all_reduce outs
// CHECK-NOT: memref.collapse_shape
// With the default 25 MiB, one bucket, started after the last gradient.
// ONE-LABEL: func.func @step
// ONE: nova.launch @kernels::@k6
// ONE-NEXT: nova.all_reduce_start(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {bucket = 0 : i64} :
// ONE: nova.launch @kernels::@kloss
// ONE-NEXT: nova.all_reduce_wait(
// ONE-NEXT: nova.launch @kernels::@k7
// ONE-NOT: {bucket = 1 : i64}
// ONE-LABEL: func.func @early_reader
module {
  func.func @step(%p: memref<4xf32>) {
    %g3 = memref.alloc() : memref<256xf32>
    nova.launch @kernels::@k3(%g3) : memref<256xf32>
    %g2 = memref.alloc() : memref<512xf32>
    nova.launch @kernels::@k2(%g2) : memref<512xf32>
    nova.launch @kernels::@k4(%g2) : memref<512xf32>
    %g1 = memref.alloc() : memref<16x32xf32>
    nova.launch @kernels::@k5(%g1) : memref<16x32xf32>
    %g0 = memref.alloc() : memref<256xf32>
    nova.launch @kernels::@k6(%g0) : memref<256xf32>
    %l = memref.alloc() : memref<4xf32>
    nova.launch @kernels::@kloss(%l) : memref<4xf32>
    nova.all_reduce outs(%g3 : memref<256xf32>)
    nova.all_reduce outs(%g2 : memref<512xf32>)
    %flat = memref.collapse_shape %g1 [[0, 1]] : memref<16x32xf32> into memref<512xf32>
    nova.all_reduce outs(%flat : memref<512xf32>)
    nova.all_reduce outs(%g0 : memref<256xf32>)
    nova.launch @kernels::@k7(%p, %g2) : memref<4xf32>, memref<512xf32>
    nova.launch @kernels::@k8(%p, %g3) : memref<4xf32>, memref<256xf32>
    nova.launch @kernels::@k9(%p, %g1) : memref<4xf32>, memref<16x32xf32>
    nova.launch @kernels::@k10(%p, %g0) : memref<4xf32>, memref<256xf32>
    return
  }
  module @kernels {
    func.func @k3(%wg: index, %a: memref<256xf32>) { return }
    func.func @k2(%wg: index, %a: memref<512xf32>) { return }
    func.func @k4(%wg: index, %a: memref<512xf32>) { return }
    func.func @k5(%wg: index, %a: memref<16x32xf32>) { return }
    func.func @k6(%wg: index, %a: memref<256xf32>) { return }
    func.func @kloss(%wg: index, %a: memref<4xf32>) { return }
    func.func @k7(%wg: index, %p: memref<4xf32>, %a: memref<512xf32>) { return }
    func.func @k8(%wg: index, %p: memref<4xf32>, %a: memref<256xf32>) { return }
    func.func @k9(%wg: index, %p: memref<4xf32>, %a: memref<16x32xf32>) { return }
    func.func @k10(%wg: index, %p: memref<4xf32>, %a: memref<256xf32>) { return }
  }
}

// -----

// A gradient whose sum is read (k2) before another gradient of the open
// bucket is produced (k3) cannot share that bucket: starting it after k3
// would delay k2. A gradient of another element type starts a bucket too,
// and one larger than the bucket is a bucket of its own.
// CHECK-LABEL: func.func @early_reader
// CHECK: nova.launch @kernels::@k1(%[[A:[a-z0-9_]+]])
// CHECK-NEXT: nova.all_reduce_start(%[[A]]) {bucket = 0 : i64} : memref<16xf32>
// CHECK-NEXT: nova.all_reduce_wait(%[[A]]) {bucket = 0 : i64} : memref<16xf32>
// CHECK-NEXT: nova.launch @kernels::@k2(%[[A]])
// CHECK: nova.launch @kernels::@k3(%[[B:[a-z0-9_]+]])
// CHECK-NEXT: nova.all_reduce_start(%[[B]]) {bucket = 1 : i64} : memref<16xf32>
// CHECK: nova.launch @kernels::@k4(%[[C:[a-z0-9_]+]])
// CHECK-NEXT: nova.all_reduce_start(%[[C]]) {bucket = 2 : i64} : memref<16xf64>
// CHECK: nova.launch @kernels::@k5(%[[D:[a-z0-9_]+]])
// CHECK-NEXT: nova.all_reduce_start(%[[D]]) {bucket = 3 : i64} : memref<2048xf32>
// CHECK-NEXT: nova.all_reduce_wait(%[[B]]) {bucket = 1 : i64}
// CHECK-NEXT: nova.all_reduce_wait(%[[C]]) {bucket = 2 : i64}
// CHECK-NEXT: nova.all_reduce_wait(%[[D]]) {bucket = 3 : i64}
// CHECK-NEXT: return
module {
  func.func @early_reader() {
    %a = memref.alloc() : memref<16xf32>
    nova.launch @kernels::@k1(%a) : memref<16xf32>
    nova.all_reduce outs(%a : memref<16xf32>)
    nova.launch @kernels::@k2(%a) : memref<16xf32>
    %b = memref.alloc() : memref<16xf32>
    nova.launch @kernels::@k3(%b) : memref<16xf32>
    %c = memref.alloc() : memref<16xf64>
    nova.launch @kernels::@k4(%c) : memref<16xf64>
    %d = memref.alloc() : memref<2048xf32>
    nova.launch @kernels::@k5(%d) : memref<2048xf32>
    nova.all_reduce outs(%b : memref<16xf32>)
    nova.all_reduce outs(%c : memref<16xf64>)
    nova.all_reduce outs(%d : memref<2048xf32>)
    return
  }
  module @kernels {
    func.func @k1(%wg: index, %a: memref<16xf32>) { return }
    func.func @k2(%wg: index, %a: memref<16xf32>) { return }
    func.func @k3(%wg: index, %a: memref<16xf32>) { return }
    func.func @k4(%wg: index, %a: memref<16xf64>) { return }
    func.func @k5(%wg: index, %a: memref<2048xf32>) { return }
  }
}

