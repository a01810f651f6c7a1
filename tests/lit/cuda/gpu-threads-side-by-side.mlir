// Independent kernels launched one after another become one launch of a
// kernel holding them side by side, each over blocks of its own: two
// parameter updates (1200 and 1280 points, 4 a unit: 300 and 320 units, 2
// blocks of 256 each)
// and a sum of squares (a block reduction: one block, its output starting
// from its dropped fill's 0). A block's index selects its op; the block
// reduction's barriers sit in a branch the whole block takes.
// RUN: nova-opt %s -split-input-file -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each | FileCheck %s
// RUN: nova-opt %s -split-input-file -nova-lower-to-kernels -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -split-input-file -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @updates
// CHECK-NEXT: nova.launch @kernels::@[[K:k[0-9]+_side0]](%arg0, %arg1, %arg5, %arg2, %arg3, %arg6, %arg4, %arg7)
// CHECK-NEXT: return
// CHECK: func.func @[[K]](
// CHECK-SAME: nova.gpu_block_threads = 256 : i64, nova.gpu_shared_bytes = 1024 : i64
// CHECK-SAME: nova.gpu_side_by_side = array<i64: 2, 2, 1>, nova.gpu_side_by_side_inits = [unit, unit, 0.000000e+00 : f32]
// CHECK-SAME: "threads: 3 independent kernels side by side, each over its own blocks (a block reduction one, warp rows 8 rows a block; 5 in all) of 256"
// CHECK-SAME: #nova.lowering_config<gpu_threads, workgroups = 5, tile = [256]
// CHECK-SAME: nova.summary = "3 kernels side by side:
// CHECK: linalg.generic {{.*}} ins(%arg1, %arg2 : memref<1200xf32>, memref<1200xf32>) outs(%arg3 : memref<1200xf32>)
// CHECK: linalg.generic {{.*}} ins(%arg4, %arg5 : memref<40x32xf32>, memref<40x32xf32>) outs(%arg6 : memref<40x32xf32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction"]} ins(%arg7 : memref<1000xf32>) outs(%arg8 : memref<f32>)
// CHECK-NOT: linalg.generic
// CHECK: return

// GPU: gpu.func @nova_[[K:k[0-9]+_side0]](
// GPU: %[[B:.*]] = gpu.block_id x
// GPU: arith.cmpi uge, %[[B]], %c0
// GPU: arith.cmpi ult, %[[B]], %c2
// GPU: scf.if
// GPU: arith.cmpi ult, %{{.*}}, %c300
// GPU: arith.cmpi uge, %[[B]], %c2
// GPU: arith.cmpi ult, %[[B]], %c4
// GPU: scf.if
// GPU: arith.subi %[[B]], %c2
// GPU: arith.cmpi ult, %{{.*}}, %c320
// GPU: arith.cmpi uge, %[[B]], %c4
// GPU: arith.cmpi ult, %[[B]], %c5
// GPU: scf.if
// GPU: gpu.barrier
// GPU: memref.store %{{.*}}, %{{.*}}[] : memref<f32>
// GPU: gpu.return
func.func @updates(%a: tensor<1200xf32>, %ga: tensor<1200xf32>, %b: tensor<40x32xf32>, %gb: tensor<40x32xf32>, %c: tensor<1000xf32>) -> (tensor<1200xf32>, tensor<40x32xf32>, tensor<f32>) {
  %s = nova.constant 0.5 : tensor<f32>
  %sa = nova.broadcast %s : tensor<f32> -> tensor<1200xf32>
  %da = nova.mul %ga, %sa : tensor<1200xf32>, tensor<1200xf32>
  %na = nova.sub %a, %da : tensor<1200xf32>, tensor<1200xf32>
  %sb = nova.broadcast %s : tensor<f32> -> tensor<40x32xf32>
  %db = nova.mul %gb, %sb : tensor<40x32xf32>, tensor<40x32xf32>
  %nb = nova.sub %b, %db : tensor<40x32xf32>, tensor<40x32xf32>
  %sq = nova.mul %c, %c : tensor<1000xf32>, tensor<1000xf32>
  %t = nova.reduce_sum %sq {axes = array<i64: 0>} : tensor<1000xf32>
  return %na, %nb, %t : tensor<1200xf32>, tensor<40x32xf32>, tensor<f32>
}

// -----

// Rows join too: a LayerNorm (a warp a row: 64 rows, 8 a block of 256, 8
// blocks), a row sum (warps: 40 rows, 5 blocks), a cross-entropy of f64
// rows (a thread a row: 20 rows, one block) and an elementwise op (2048
// points, 4 a unit: 512 units, 2 blocks). Each warp op runs in its own blocks' branch, which every
// lane of a warp takes, so its shuffles see all 32 lanes.
// CHECK-LABEL: func.func @rows
// CHECK-NEXT: nova.launch @kernels::@[[R:k[0-9]+_side[0-9]+]](
// CHECK-NEXT: return
// CHECK: func.func @[[R]](
// CHECK-SAME: nova.gpu_side_by_side = array<i64: 8, 5, 1, 2>
// CHECK-SAME: "threads: 4 independent kernels side by side, each over its own blocks (a block reduction one, warp rows 8 rows a block; 16 in all) of 256"
// CHECK: nova.layer_norm_kernel
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: nova.cross_entropy_kernel
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]

// GPU: gpu.func @nova_[[R:k[0-9]+_side[0-9]+]](
// GPU: %[[B:.*]] = gpu.block_id x
// GPU: arith.cmpi ult, %[[B]], %c8
// GPU: scf.if
// GPU: gpu.shuffle  xor
// GPU: arith.cmpi ult, %[[B]], %c13
// GPU: scf.if
// GPU: gpu.shuffle  xor
// GPU: arith.cmpi ult, %[[B]], %c14
// GPU: scf.if
// GPU: math.log
// GPU: arith.cmpi ult, %[[B]], %c16
// GPU: scf.if
// GPU: math.tanh
// GPU: gpu.return
func.func @rows(%x: tensor<64x64xf32>, %gamma: tensor<64xf32>, %beta: tensor<64xf32>, %s: tensor<40x100xf32>,
                %z: tensor<20x10xf64>, %y: tensor<20xi32>, %e: tensor<16x128xf32>)
    -> (tensor<64x64xf32>, tensor<40xf32>, tensor<20xf64>, tensor<16x128xf32>) {
  %n = nova.layer_norm %x, %gamma, %beta {eps = 1.0e-5 : f64} : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  %r = nova.reduce_sum %s {axes = array<i64: 1>} : tensor<40x100xf32>
  %c = nova.cross_entropy %z, %y : tensor<20x10xf64>, tensor<20xi32>
  %t = nova.tanh %e : tensor<16x128xf32>
  return %n, %r, %c, %t : tensor<64x64xf32>, tensor<40xf32>, tensor<20xf64>, tensor<16x128xf32>
}

// -----

// Ops with no parallel loop (an optimizer's scalar steps: a step count, a
// learning rate's bias correction) join too, one block each, whose first
// thread runs the op.
// CHECK-LABEL: func.func @scalars
// CHECK-NEXT: nova.launch @kernels::@[[S:k[0-9]+_side[0-9]+]](
// CHECK-NEXT: return
// CHECK: func.func @[[S]](
// CHECK-SAME: nova.gpu_side_by_side = array<i64: 1, 1, 2>

// GPU: gpu.func @nova_[[S:k[0-9]+_side[0-9]+]](
// GPU: %[[B:.*]] = gpu.block_id x
// GPU: arith.cmpi ult, %[[B]], %c1
// GPU: scf.if
// GPU: arith.cmpi eq, %{{.*}}, %c0
// GPU: scf.if
// GPU: math.sqrt
// GPU: arith.cmpi ult, %[[B]], %c2
// GPU: scf.if
// GPU: arith.cmpi eq, %{{.*}}, %c0
// GPU: scf.if
// GPU: math.exp
// GPU: arith.cmpi ult, %[[B]], %c4
// GPU: scf.if
// GPU: math.tanh
// GPU: gpu.return
func.func @scalars(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<1200xf32>) -> (tensor<f32>, tensor<f32>, tensor<1200xf32>) {
  %0 = nova.sqrt %a : tensor<f32>
  %1 = nova.exp %b : tensor<f32>
  %2 = nova.tanh %c : tensor<1200xf32>
  return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<1200xf32>
}

// -----

// A launch that could run side by side, right after one that cannot (a
// matmul) whose launch before could, moves before the matmul when the two
// touch no common buffer: exp(%y) joins tanh(%x); exp of the matmul's own
// result stays after it.
// CHECK-LABEL: func.func @hoisted
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+_side[0-9]+}}(%arg0, %arg4, %arg3, %arg6)
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9_]+}}(%arg5, %arg4, %arg1)
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9_]+}}(%arg7, %arg4, %arg2)
// CHECK-NEXT: return
// CHECK-LABEL: func.func @kept
// CHECK-NEXT: nova.launch @kernels::@[[TANH:k[0-9]+]](%arg0, %arg3)
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9_]+}}(%arg4, %arg3, %arg1)
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+}}(%arg4, %arg5)
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9_]+}}(%arg6, %arg3, %arg2)
// CHECK-NEXT: return
func.func @hoisted(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>, %v: tensor<32x8xf32>, %y: tensor<64x16xf32>) -> (tensor<64x32xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x8xf32>) {
  %t = nova.tanh %x : tensor<64x32xf32>
  %m = nova.matmul %t, %w : tensor<64x32xf32>, tensor<32x16xf32>
  %e = nova.exp %y : tensor<64x16xf32>
  %n = nova.matmul %t, %v : tensor<64x32xf32>, tensor<32x8xf32>
  return %t, %m, %e, %n : tensor<64x32xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x8xf32>
}
func.func @kept(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>, %v: tensor<32x8xf32>) -> (tensor<64x32xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x8xf32>) {
  %t = nova.tanh %x : tensor<64x32xf32>
  %m = nova.matmul %t, %w : tensor<64x32xf32>, tensor<32x16xf32>
  %e = nova.exp %m : tensor<64x16xf32>
  %n = nova.matmul %t, %v : tensor<64x32xf32>, tensor<32x8xf32>
  return %t, %m, %e, %n : tensor<64x32xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x8xf32>
}

// -----

// A fill joins too (points: 64, one block).
// CHECK-LABEL: func.func @fills
// CHECK-NEXT: nova.launch @kernels::@[[F:k[0-9]+_side[0-9]+]](%arg1, %arg0, %arg2)
// CHECK-NEXT: return
// CHECK: func.func @[[F]](
// CHECK-SAME: nova.gpu_side_by_side = array<i64: 1, 2>
// CHECK: linalg.fill
// CHECK: math.tanh
func.func @fills(%c: tensor<1200xf32>) -> (tensor<64xf32>, tensor<1200xf32>) {
  %z = nova.constant 0.0 : tensor<64xf32>
  %t = nova.tanh %c : tensor<1200xf32>
  return %z, %t : tensor<64xf32>, tensor<1200xf32>
}
