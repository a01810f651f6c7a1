// A fill dropped before the reduction into the buffer it filled
// (nova.gpu_output_init) even with other launches between, where none of
// them touches that buffer; where one reads it, the fill stays.
// RUN: nova-opt %s -nova-outline-kernels -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s

// CHECK-LABEL: func.func @fill_apart
// CHECK-NEXT: nova.launch @kernels::@[[EXP:k[0-9]+]](%arg0, %arg2)
// CHECK-NEXT: nova.launch @kernels::@[[SUM:k[0-9]+]](%arg2, %arg1)
// CHECK-NEXT: return
// CHECK-LABEL: func.func @fill_read_between
// CHECK-NEXT: nova.launch @kernels::@[[FILL:k[0-9]+]](%arg1)
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+}}(%arg0, %arg1, %arg2)
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+}}(%arg2, %arg1)
// CHECK-NEXT: return
// CHECK: func.func @[[SUM]]({{.*}}nova.gpu_output_init = 0.000000e+00 : f32
// CHECK: func.func @[[FILL]](
// CHECK: linalg.fill
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @fill_apart(%x: memref<64x256xf32>, %out: memref<64xf32>, %y: memref<64x256xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<64xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<64x256xf32>) outs(%y : memref<64x256xf32>) {
  ^bb0(%a: f32, %b: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%y : memref<64x256xf32>) outs(%out : memref<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}
func.func @fill_read_between(%x: memref<64x256xf32>, %out: memref<64xf32>, %y: memref<64x256xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%out : memref<64xf32>)
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %out : memref<64x256xf32>, memref<64xf32>) outs(%y : memref<64x256xf32>) {
  ^bb0(%a: f32, %o: f32, %b: f32):
    %e = arith.addf %a, %o : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%y : memref<64x256xf32>) outs(%out : memref<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}
