// A kernel launched both right after a fill and without one (adding onto
// what its first launch left): the first launch takes a clone of it told
// the fill's constant (nova.gpu_output_init), the second keeps the kernel,
// which reads the buffer. (After -nova-lower-to-kernels; see
// gpu-threads-fills.mlir.)
// RUN: nova-opt %s -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @twice
// CHECK-NEXT: nova.launch @kernels::@k1_init0(%arg0, %arg1)
// CHECK-NEXT: nova.launch @kernels::@k1(%arg0, %arg1)
// CHECK-NEXT: return
// CHECK-NOT: func.func @k0
// CHECK: func.func @k1_init0({{.*}}nova.gpu_output_init = 0.000000e+00 : f32
// CHECK: func.func @k1({{.*}}) attributes {nova.gpu_block_threads = 256 : i64, nova.gpu_why
// CHECK-NOT: func.func @k0
// GPU: gpu.func @nova_k1_init0(%{{.*}}: memref<64x256xf32>, %[[OUT:.*]]: memref<256xf32>)
// GPU-NOT: memref.load %[[OUT]]
// GPU: scf.for {{.*}} iter_args
// GPU-NOT: memref.load %[[OUT]]
// GPU: memref.store %{{.*}}, %[[OUT]][
// GPU: gpu.func @nova_k1(%{{.*}}: memref<64x256xf32>, %[[OUT2:.*]]: memref<256xf32>)
// GPU: scf.for {{.*}} iter_args
// GPU: memref.load %[[OUT2]]
// GPU: memref.store %{{.*}}, %[[OUT2]][
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @twice(%arg0: memref<64x256xf32>, %arg1: memref<256xf32>) {
    nova.launch @kernels::@k0(%arg1) : memref<256xf32>
    nova.launch @kernels::@k1(%arg0, %arg1) : memref<64x256xf32>, memref<256xf32>
    nova.launch @kernels::@k1(%arg0, %arg1) : memref<64x256xf32>, memref<256xf32>
    return
  }
  module @kernels {
    func.func @k0(%arg0: index, %arg1: memref<256xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0], register_tile = []>} {
      %cst = arith.constant 0.000000e+00 : f32
      linalg.fill ins(%cst : f32) outs(%arg1 : memref<256xf32>)
      return
    }
    func.func @k1(%arg0: index, %arg1: memref<64x256xf32>, %arg2: memref<256xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0, 0], register_tile = []>} {
      linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["reduction", "parallel"]} ins(%arg1 : memref<64x256xf32>) outs(%arg2 : memref<256xf32>) {
      ^bb0(%in: f32, %out: f32):
        %0 = arith.addf %in, %out : f32
        linalg.yield %0 : f32
      }
      return
    }
  }
}
