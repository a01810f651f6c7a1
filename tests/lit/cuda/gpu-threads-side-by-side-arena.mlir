// Side by side only where it costs the arena little: one launch holds all
// its members' buffers at once, so a buffer an early member uses last can
// no longer lend its bytes to one a later member uses first. In @large the
// sum of squares is the last use of the 16 KiB product and the square
// makes a new 128 KiB buffer: overlapping them would cost 128 KiB (more
// than the 64 KiB a run may add), so they stay two launches. In @small the
// new buffer is 16 KiB: one launch.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s

// CHECK-LABEL: func.func @large
// CHECK: nova.launch @kernels::@[[MM:k[0-9_]+]](
// CHECK-NEXT: nova.launch @kernels::@[[SUM:k[0-9]+]](%alloc, %arg4)
// CHECK-NEXT: %[[NEW:.*]] = memref.alloc() {{.*}} : memref<256x128xf32>
// CHECK-NEXT: nova.launch @kernels::@[[SQ:k[0-9]+]](%arg2, %[[NEW]])
// The last product (4 x 128 over K = 256), one launch (3xtf32 on the A100's
// tensor cores).
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+_1}}(%arg5, %arg3, %[[NEW]])
// CHECK-NEXT: return
func.func @large(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>, %d: tensor<256x128xf32>, %x: tensor<4x256xf32>) -> (tensor<f32>, tensor<4x128xf32>) {
  %m = nova.matmul %a, %b : tensor<64x64xf32>, tensor<64x64xf32>
  %t = nova.reduce_sum %m {axes = array<i64: 0, 1>} : tensor<64x64xf32>
  %d2 = nova.mul %d, %d : tensor<256x128xf32>, tensor<256x128xf32>
  %n = nova.matmul %x, %d2 : tensor<4x256xf32>, tensor<256x128xf32>
  return %t, %n : tensor<f32>, tensor<4x128xf32>
}

// CHECK-LABEL: func.func @small
// CHECK: nova.launch @kernels::@[[MM:k[0-9_]+]](
// CHECK-NEXT: %[[NEW:.*]] = memref.alloc() {{.*}} : memref<64x64xf32>
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+_side[0-9]+}}(
// CHECK-NEXT: nova.launch
// CHECK-NEXT: return
func.func @small(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>, %d: tensor<64x64xf32>, %x: tensor<4x64xf32>) -> (tensor<f32>, tensor<4x64xf32>) {
  %m = nova.matmul %a, %b : tensor<64x64xf32>, tensor<64x64xf32>
  %t = nova.reduce_sum %m {axes = array<i64: 0, 1>} : tensor<64x64xf32>
  %d2 = nova.mul %d, %d : tensor<64x64xf32>, tensor<64x64xf32>
  %n = nova.matmul %x, %d2 : tensor<4x64xf32>, tensor<64x64xf32>
  return %t, %n : tensor<f32>, tensor<4x64xf32>
}
