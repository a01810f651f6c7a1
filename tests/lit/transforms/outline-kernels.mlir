// RUN: nova-opt %s -nova-outline-kernels -verify-each -split-input-file | FileCheck %s

// Each compute op becomes a kernel taking the workgroup number and the whole
// buffers it touches; the step keeps only allocs, launches and deallocs.
// Views and constants are cloned into the kernels that use them. The fill
// that initializes the matmul's result shares the matmul's kernel.
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[X:.*]]: memref<4x8xf32>, %[[W:.*]]: memref<8x3xf32>, %[[OUT:.*]]: memref<4x3xf32>)
// CHECK-NEXT: %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x3xf32>
// CHECK-NEXT: nova.launch @kernels::@k0(%[[A]], %[[X]], %[[W]]) : memref<4x3xf32>, memref<4x8xf32>, memref<8x3xf32>
// CHECK-NEXT: nova.launch @kernels::@k1(%[[A]], %[[OUT]]) : memref<4x3xf32>, memref<4x3xf32>
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: return
// CHECK: module @kernels
// CHECK: func.func @k0(%{{.*}}: index, %[[B:.*]]: memref<4x3xf32>, %{{.*}}: memref<4x8xf32>, %{{.*}}: memref<8x3xf32>)
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0.0
// CHECK-NEXT: linalg.fill ins(%[[Z]] : f32) outs(%[[B]] : memref<4x3xf32>)
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[B]] : memref<4x3xf32>) attrs = {nova.kernel = "matmul"}
// CHECK: func.func @k1(%{{.*}}: index, %[[IN:.*]]: memref<4x3xf32>, %[[O:.*]]: memref<4x3xf32>)
// CHECK-DAG: %[[V:.*]] = memref.collapse_shape %[[IN]]
// CHECK-DAG: %[[U:.*]] = memref.collapse_shape %[[O]]
// CHECK: linalg.copy ins(%[[V]] : memref<12xf32>) outs(%[[U]] : memref<12xf32>)
#mm0 = affine_map<(d0, d1, d2) -> (d0, d1)>
#mm1 = affine_map<(d0, d1, d2) -> (d1, d2)>
#mm2 = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @step(%x: memref<4x8xf32>, %w: memref<8x3xf32>, %out: memref<4x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() {alignment = 64 : i64} : memref<4x3xf32>
  linalg.fill ins(%zero : f32) outs(%a : memref<4x3xf32>)
  linalg.generic {indexing_maps = [#mm0, #mm1, #mm2], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : memref<4x8xf32>, memref<8x3xf32>) outs(%a : memref<4x3xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %flat = memref.collapse_shape %a [[0, 1]] : memref<4x3xf32> into memref<12xf32>
  %oflat = memref.collapse_shape %out [[0, 1]] : memref<4x3xf32> into memref<12xf32>
  memref.copy %flat, %oflat : memref<12xf32> to memref<12xf32>
  memref.dealloc %a : memref<4x3xf32>
  return
}

// -----

// A scalar read of a buffer nothing writes (a seed) is cloned into the kernel.
// CHECK-LABEL: func.func @seeded
// CHECK-NEXT: nova.launch @kernels::@k0(%{{.*}}, %{{.*}}) : memref<i64>, memref<8xi64>
// CHECK-NEXT: return
// CHECK: func.func @k0(%{{.*}}: index, %[[S:.*]]: memref<i64>, %[[O:.*]]: memref<8xi64>)
// CHECK-NEXT: %[[V:.*]] = memref.load %[[S]][]
// CHECK-NEXT: linalg.fill ins(%[[V]] : i64) outs(%[[O]] : memref<8xi64>)
func.func @seeded(%seed: memref<i64>, %out: memref<8xi64>) {
  %s = memref.load %seed[] : memref<i64>
  linalg.fill ins(%s : i64) outs(%out : memref<8xi64>)
  return
}

// -----

// The elementwise op that consumes a matmul's result (nothing else reads
// it) joins the matmul's kernel as its epilogue.
// CHECK-LABEL: func.func @epilogue
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: nova.launch @kernels::@k0(
// CHECK-NEXT: return
// CHECK: func.func @k0(
// CHECK: linalg.generic {{.*}} attrs = {nova.kernel = "matmul"}
// CHECK: arith.addf
// CHECK: linalg.generic
// CHECK: arith.maximumf
func.func @epilogue(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<4x16xf32>
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : memref<4x8xf32>, memref<8x16xf32>) outs(%a : memref<4x16xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x16xf32>) outs(%y : memref<4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Also one whose result is a narrower float than the product: a bias add
// rounded to bf16 (the qkv copy attention reads, Bf16Copies.h), which the
// matmul kernels store as their result (CPU and GPU alike).
// CHECK-LABEL: func.func @narrowing_epilogue
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: nova.launch @kernels::@k0(
// CHECK-NEXT: return
// CHECK: func.func @k0(
// CHECK: linalg.generic {{.*}} attrs = {nova.kernel = "matmul"}
// CHECK: linalg.generic
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @narrowing_epilogue(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %bias: memref<16xf32>, %y: memref<4x16xbf16>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<4x16xf32>
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : memref<4x8xf32>, memref<8x16xf32>) outs(%a : memref<4x16xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (n)>, affine_map<(m, n) -> (m, n)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a, %bias : memref<4x16xf32>, memref<16xf32>) outs(%y : memref<4x16xbf16>) {
  ^bb0(%v: f32, %b: f32, %o: bf16):
    %r = arith.addf %v, %b : f32
    %t = arith.truncf %r : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// Not across a data-parallel sum of the matmul's result (a gradient summed
// over the ranks, then scaled): the matmul runs before the sum, the
// elementwise op after it, as two kernels.
// CHECK-LABEL: func.func @summed_between
// CHECK-NEXT: %[[A:.*]] = memref.alloc
// CHECK-NEXT: nova.launch @kernels::@k0(%{{.*}}, %{{.*}}, %[[A]])
// CHECK-NEXT: nova.all_reduce outs(%[[A]] : memref<4x16xf32>)
// CHECK-NEXT: nova.launch @kernels::@k1(%[[A]],
// CHECK-NEXT: return
func.func @summed_between(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<4x16xf32>
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : memref<4x8xf32>, memref<8x16xf32>) outs(%a : memref<4x16xf32>) attrs = {nova.kernel = "matmul"} {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  nova.all_reduce outs(%a : memref<4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x16xf32>) outs(%y : memref<4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  }
  return
}
