// A reduction of many points to a scalar (a large gradient's sum of
// squares for clipping) is two kernels: 1024 contiguous parts of 1024
// points, a warp each (lanes reading side by side, a butterfly of
// shuffles), into a new workspace of 1024 partials (from the combiner's
// identity), then the partials in part order into the result on one
// block (the fill before it dropped: it starts from the constant). Below
// 65536 points it stays one block.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_90a side-by-side=0" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_90a side-by-side=0" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_90a}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @sum_of_squares
// CHECK-NEXT: %[[PARTS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
// CHECK-NEXT: nova.launch @kernels::@[[K:k[0-9]+]](%arg0, %[[PARTS]]) : memref<512x2048xf32>, memref<1024xf32>
// CHECK-NEXT: nova.launch @kernels::@[[K]]_total(%[[PARTS]], %arg1) : memref<1024xf32>, memref<f32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @small
// CHECK-NEXT: nova.launch
// CHECK-NEXT: return
// CHECK: func.func @[[K]]({{.*}}nova.gpu_output_init = 0.000000e+00 : f32{{.*}}"threads: 1024 points of its parallel loops, a warp each
// CHECK: memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<512x2048xf32> into memref<1048576xf32>
// CHECK: memref.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [1024, 1024] : memref<1048576xf32> into memref<1024x1024xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}}outs(%{{.*}} : memref<1024xf32>)
// CHECK: arith.mulf
// CHECK: func.func @[[K]]_total({{.*}}nova.gpu_output_init = 0.000000e+00 : f32{{.*}}"threads: a reduction of 1024 points
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction"]{{.*}}ins(%{{.*}} : memref<1024xf32>) outs(%{{.*}} : memref<f32>)
// CHECK: func.func @{{k[0-9]+}}({{.*}}"threads: a reduction of 32768 points

// GPU: gpu.func @nova_[[G:k[0-9]+]](%{{.*}}: memref<512x2048xf32>, %{{.*}}: memref<1024xf32>)
// GPU: gpu.shuffle  xor
// GPU: gpu.func @nova_[[G]]_total(%{{.*}}: memref<1024xf32>, %{{.*}}: memref<f32>)
// GPU: gpu.barrier
func.func @sum_of_squares(%w: tensor<512x2048xf32>) -> tensor<f32> {
  %s = nova.mul %w, %w : tensor<512x2048xf32>, tensor<512x2048xf32>
  %t = nova.reduce_sum %s {axes = array<i64: 0, 1>} : tensor<512x2048xf32>
  return %t : tensor<f32>
}

func.func @small(%w: tensor<64x512xf32>) -> tensor<f32> {
  %t = nova.reduce_sum %w {axes = array<i64: 0, 1>} : tensor<64x512xf32>
  return %t : tensor<f32>
}
