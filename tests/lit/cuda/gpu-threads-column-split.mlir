// A sum across many rows into few columns (a bias gradient over 16 x 128
// tokens) is two kernels: 64 parts of 32 rows each, a thread a (part,
// column), into a new workspace of 64 x 256 partials (the fill before
// the sum becomes the parts' start, the combiner's identity), then each
// column's 64 partials in part order into the result. Both keep their
// partials in a register (iter_args) and store each element once. A sum
// across 100 rows stays one kernel.
// RUN: nova-opt %s -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @bias_grad
// CHECK-NEXT: %[[PARTS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<64x256xf32>
// CHECK-NEXT: nova.launch @kernels::@k1(%arg0, %[[PARTS]]) : memref<16x128x256xf32>, memref<64x256xf32>
// CHECK-NEXT: nova.launch @kernels::@k1_total(%[[PARTS]], %arg1) : memref<64x256xf32>, memref<256xf32>
// CHECK-NEXT: nova.launch @kernels::@k2(%arg2, %arg3)
// CHECK-NEXT: return
// CHECK: func.func @k1({{.*}}nova.gpu_output_init = 0.000000e+00 : f32{{.*}}"threads: 16384 points of its parallel loops (one unit a thread) over 64 blocks of 256"
// CHECK: memref.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : memref<16x128x256xf32> into memref<2048x256xf32>
// CHECK: memref.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [64, 32, 256] : memref<2048x256xf32> into memref<64x32x256xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}}outs(%{{.*}} : memref<64x256xf32>)
// CHECK: func.func @k1_total({{.*}}nova.gpu_output_init = 0.000000e+00 : f32{{.*}}"threads: 256 points of its parallel loops
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]{{.*}}ins(%{{.*}} : memref<64x256xf32>) outs(%{{.*}} : memref<256xf32>)
// CHECK: func.func @k2({{.*}}"threads: 40 points of its parallel loops

// GPU: gpu.func @nova_k1(%[[X:.*]]: memref<16x128x256xf32>, %[[P:.*]]: memref<64x256xf32>)
// GPU: scf.for %{{.*}} = %c0 to %c32 step %c1 iter_args(
// GPU-NEXT: memref.load %{{.*}} : memref<64x32x256xf32>
// GPU-NOT: memref.load %[[P]]
// GPU: memref.store %{{.*}}, %[[P]][
// GPU: gpu.func @nova_k1_total(%[[Q:.*]]: memref<64x256xf32>, %[[OUT:.*]]: memref<256xf32>)
// GPU: scf.for %{{.*}} = %c0 to %c64 step %c1 iter_args(
// GPU-NEXT: memref.load %[[Q]]
// GPU-NOT: memref.load %[[OUT]]
// GPU: memref.store %{{.*}}, %[[OUT]][
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d2)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @bias_grad(%arg0: memref<16x128x256xf32>, %arg1: memref<256xf32>, %arg2: memref<100x40xf32>, %arg3: memref<40xf32>) {
    nova.launch @kernels::@k0(%arg1) : memref<256xf32>
    nova.launch @kernels::@k1(%arg0, %arg1) : memref<16x128x256xf32>, memref<256xf32>
    nova.launch @kernels::@k2(%arg2, %arg3) : memref<100x40xf32>, memref<40xf32>
    return
  }
  module @kernels {
    func.func @k0(%arg0: index, %arg1: memref<256xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0], register_tile = []>} {
      %cst = arith.constant 0.000000e+00 : f32
      linalg.fill ins(%cst : f32) outs(%arg1 : memref<256xf32>)
      return
    }
    func.func @k1(%arg0: index, %arg1: memref<16x128x256xf32>, %arg2: memref<256xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0, 0, 0], register_tile = []>} {
      linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["reduction", "reduction", "parallel"]} ins(%arg1 : memref<16x128x256xf32>) outs(%arg2 : memref<256xf32>) {
      ^bb0(%in: f32, %out: f32):
        %0 = arith.addf %in, %out : f32
        linalg.yield %0 : f32
      }
      return
    }
    func.func @k2(%arg0: index, %arg1: memref<100x40xf32>, %arg2: memref<40xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0, 0], register_tile = []>} {
      linalg.generic {indexing_maps = [#map2, #map3], iterator_types = ["reduction", "parallel"]} ins(%arg1 : memref<100x40xf32>) outs(%arg2 : memref<40xf32>) {
      ^bb0(%in: f32, %out: f32):
        %0 = arith.addf %in, %out : f32
        linalg.yield %0 : f32
      }
      return
    }
  }
}
