// RUN: nova-opt %s -nova-configure-kernels="vector-bits=512 cores=2" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-configure-kernels="vector-bits=256 vector-registers=16 cores=1" -verify-each | FileCheck %s --check-prefix=ONE
// RUN: nova-opt %s -nova-configure-kernels="vector-bits=512 cores=2 l1d-bytes=32768 l2-bytes=1048576" -verify-each | FileCheck %s --check-prefix=ZEN

// A 2048x768 elementwise op (2^20 points) on 2 cores: 8 workgroups of 256 rows.
// CHECK-LABEL: func.func @big_elementwise
// CHECK-SAME: nova.lowering_config = #nova.lowering_config<loops, workgroups = 8, tile = [256, 0], register_tile = []>
// ONE-LABEL: func.func @big_elementwise
// ONE-SAME: #nova.lowering_config<loops, workgroups = 1, tile = [0, 0], register_tile = []>
// A 64-point op is not worth threads.
// CHECK-LABEL: func.func @small
// CHECK-SAME: #nova.lowering_config<loops, workgroups = 1, tile = [0], register_tile = []>
// A full reduction has no parallel loop to split.
// CHECK-LABEL: func.func @full_reduction
// CHECK-SAME: #nova.lowering_config<loops, workgroups = 1, tile = [0, 0], register_tile = []>
// A column sum (a bias gradient) splits its columns into one stripe per
// core: 2 workgroups of 128 columns, not 8 of 32.
// CHECK-LABEL: func.func @column_sum
// CHECK-SAME: #nova.lowering_config<loops, workgroups = 2, tile = [0, 128], register_tile = []>
// A 2048x768x256 matmul with 32 registers of 16 lanes: 6 x 4-vector
// register tiles (24 accumulators, 2.4 FMAs per load); kc = K = 256 (a
// quarter of the 48 KiB L1 would hold the 6 x 512 lhs micro-panel); one
// workgroup per core, split by columns (2 column blocks of 384 pack the rhs
// once; 2 row blocks would pack it twice).
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: #nova.lowering_config<matmul, workgroups = 2, tile = [2048, 384], cache_tile = [256], register_tile = [6, 64]>
// 16 registers of 8 lanes (AVX2): 4 x 3 vectors (12 accumulators, 1.71
// FMAs per load; 768 = 32 x 24 has no edge); kc = 256; one core, two
// column blocks: a packed rhs slab (256 x 384 floats) fits a quarter of the
// 2 MiB L2, all 768 columns would not.
// ONE-LABEL: func.func @matmul
// ONE-SAME: #nova.lowering_config<matmul, workgroups = 2, tile = [2048, 384], cache_tile = [256], register_tile = [4, 24]>
// A lhs computed while packed (here tanh(a)) is computed again for every
// column block, so its columns take one block where their packed slab fits
// three quarters of L2. The medium GPT's MLP down projection on a 1 MiB L2
// (ZEN): kc 336 x 512 columns is 672 KiB, above half (the budget of a
// packed lhs, which would make 2 blocks of 256), below three quarters: the
// rows split between the cores instead; 7 equal slabs of 296.
// ZEN-LABEL: func.func @prologue_matmul
// ZEN-SAME: #nova.lowering_config<matmul, workgroups = 2, tile = [1026, 512], cache_tile = [296], register_tile = [6, 64]>
// K = 512 on a 32 KiB L1 (ZEN): kc 336 puts the 6-row lhs micro-panel in
// a quarter of it, but K fits half, so it takes one slab of 512 (a product
// with an epilogue then stores no partial sums); the 512 x 128 slabs take
// a quarter of L2: 16 column blocks.
// ZEN-LABEL: func.func @one_slab_k512
// ZEN-SAME: #nova.lowering_config<matmul, workgroups = 16, tile = [2048, 128], cache_tile = [512], register_tile = [6, 64]>
// The medium GPT's first MLP weight gradient (lhs transposed, 2048
// columns) with a 1 MiB L2, where the slab cap allows 6 register tiles a
// block: 6 blocks of 384 are a multiple of the cores but leave 1152 and
// 896 columns to them, so 8 blocks of 256.
// ZEN-LABEL: func.func @even_cores
// ZEN-SAME: #nova.lowering_config<matmul, workgroups = 8, tile = [512, 256], cache_tile = [296, 528], register_tile = [6, 64]>
// Attention: one workgroup per (batch, head), 16 x 4 = 64. hd = 64 in 16
// lanes is 4 vectors; rows x cv accumulators with cv rhs vectors and a
// broadcast in 32 registers, the most FMAs per load: 6 rows x 4 vectors.
// With 16 registers of 8 lanes (8 vectors per head): 6 x 2 vectors. The
// backward's blocks of query rows: its two 6 x 128 score scratches take
// 6 KiB, half of the 48 KiB L1 holds 4 of them: 24 rows (the cap).
// CHECK-LABEL: func.func @attention
// CHECK-SAME: #nova.lowering_config<attention, workgroups = 64, tile = [1, 1], cache_tile = [24], register_tile = [6, 64]>
// ONE-LABEL: func.func @attention
// ONE-SAME: #nova.lowering_config<attention, workgroups = 64, tile = [1, 1], cache_tile = [24], register_tile = [6, 16]>
// T = 512: one 6-row block's scratches (24 KiB) fill half of L1, so the
// blocks are 24 rows with the scratches (96 KiB) in L2.
// CHECK-LABEL: func.func @attention_long
// CHECK-SAME: #nova.lowering_config<attention, workgroups = 8, tile = [1, 1], cache_tile = [24], register_tile = [6, 64]>
// hd = 12 / 2 = 6 takes 2-lane vectors (3 per head, all in one block); the rows are
// capped by T = 5, and so is the backward's block.
// CHECK-LABEL: func.func @attention_narrow
// CHECK-SAME: #nova.lowering_config<attention, workgroups = 4, tile = [1, 1], cache_tile = [5], register_tile = [5, 6]>
// A scatter-add's loop nest, 2048 updates x 256 columns, split along its
// column loop: one chunk of 128 columns (whole 16-lane vectors) per core.
// On one core it runs whole.
// CHECK-LABEL: func.func @scatter
// CHECK-SAME: #nova.lowering_config<loops, workgroups = 2, tile = [128], register_tile = []>
// ONE-LABEL: func.func @scatter
// ONE-SAME: #nova.lowering_config<serial, workgroups = 1, tile = [], register_tile = []>
// A LayerNorm of 2048 rows: 8 workgroups of 256 rows on 2 cores, 4 rows
// at a time (2 FMA pipes x latency 4 / 2), 16 lanes; on one core whole.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: #nova.lowering_config<rows, workgroups = 8, tile = [256], register_tile = [4, 16]>
// ONE-LABEL: func.func @layer_norm
// ONE-SAME: #nova.lowering_config<rows, workgroups = 1, tile = [2048], register_tile = [4, 8]>
// Anything else runs whole.
// CHECK-LABEL: func.func @loop_nest
// CHECK-SAME: #nova.lowering_config<serial, workgroups = 1, tile = [], register_tile = []>
module {
  module @kernels {
    func.func @big_elementwise(%wg: index, %a: memref<2048x768xf32>, %b: memref<2048x768xf32>) {
      linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
          ins(%a : memref<2048x768xf32>) outs(%b : memref<2048x768xf32>) {
      ^bb0(%x: f32, %y: f32):
        %e = math.exp %x : f32
        linalg.yield %e : f32
      }
      return
    }
    func.func @small(%wg: index, %a: memref<64xf32>) {
      %c = arith.constant 0.0 : f32
      linalg.fill ins(%c : f32) outs(%a : memref<64xf32>)
      return
    }
    func.func @full_reduction(%wg: index, %a: memref<512x512xf32>, %s: memref<f32>) {
      linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]}
          ins(%a : memref<512x512xf32>) outs(%s : memref<f32>) {
      ^bb0(%x: f32, %acc: f32):
        %r = arith.addf %x, %acc : f32
        linalg.yield %r : f32
      }
      return
    }
    func.func @column_sum(%wg: index, %a: memref<2048x256xf32>, %s: memref<256xf32>) {
      linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>], iterator_types = ["reduction", "parallel"]}
          ins(%a : memref<2048x256xf32>) outs(%s : memref<256xf32>) {
      ^bb0(%x: f32, %acc: f32):
        %r = arith.addf %x, %acc : f32
        linalg.yield %r : f32
      }
      return
    }
    func.func @matmul(%wg: index, %a: memref<2048x256xf32>, %b: memref<256x768xf32>, %c: memref<2048x768xf32>) {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<2048x256xf32>, memref<256x768xf32>) outs(%c : memref<2048x768xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
    func.func @prologue_matmul(%wg: index, %a: memref<2048x2048xf32>, %b: memref<2048x512xf32>, %c: memref<2048x512xf32>) {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<2048x2048xf32>, memref<2048x512xf32>) outs(%c : memref<2048x512xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %t = math.tanh %x : f32
        %p = arith.mulf %t, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
    func.func @one_slab_k512(%wg: index, %a: memref<2048x512xf32>, %b: memref<512x2048xf32>, %c: memref<2048x2048xf32>) {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<2048x512xf32>, memref<512x2048xf32>) outs(%c : memref<2048x2048xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
    func.func @even_cores(%wg: index, %a: memref<2048x512xf32>, %b: memref<2048x2048xf32>, %c: memref<512x2048xf32>) {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (k, m)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<2048x512xf32>, memref<2048x2048xf32>) outs(%c : memref<512x2048xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
    func.func @attention(%wg: index, %x: memref<16x128x768xf32>, %g: memref<16x128x256xf32>, %d: memref<16x128x768xf32>) {
      nova.attention_kernel ins(%x, %g : memref<16x128x768xf32>, memref<16x128x256xf32>) outs(%d : memref<16x128x768xf32>) {heads = 4 : i64, scale = 0.125 : f64, backward}
      return
    }
    func.func @attention_long(%wg: index, %x: memref<2x512x768xf32>, %g: memref<2x512x256xf32>, %d: memref<2x512x768xf32>) {
      nova.attention_kernel ins(%x, %g : memref<2x512x768xf32>, memref<2x512x256xf32>) outs(%d : memref<2x512x768xf32>) {heads = 4 : i64, scale = 0.125 : f64, backward}
      return
    }
    func.func @attention_narrow(%wg: index, %x: memref<2x5x36xf32>, %o: memref<2x5x12xf32>) {
      nova.attention_kernel ins(%x : memref<2x5x36xf32>) outs(%o : memref<2x5x12xf32>) {heads = 2 : i64, scale = 0.5 : f64}
      return
    }
    func.func @scatter(%wg: index, %idx: memref<2048xindex>, %u: memref<2048x256xf32>, %out: memref<256x256xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2048 = arith.constant 2048 : index
      %c256 = arith.constant 256 : index
      scf.for %n = %c0 to %c2048 step %c1 {
        %r = memref.load %idx[%n] : memref<2048xindex>
        scf.for %d = %c0 to %c256 step %c1 {
          %a = memref.load %out[%r, %d] : memref<256x256xf32>
          %b = memref.load %u[%n, %d] : memref<2048x256xf32>
          %s = arith.addf %a, %b : f32
          memref.store %s, %out[%r, %d] : memref<256x256xf32>
        } {nova.split_loop}
      }
      return
    }
    func.func @layer_norm(%wg: index, %x: memref<2048x256xf32>, %g: memref<256xf32>, %b: memref<256xf32>, %y: memref<2048x256xf32>) {
      nova.layer_norm_kernel ins(%x, %g, %b : memref<2048x256xf32>, memref<256xf32>, memref<256xf32>) outs(%y : memref<2048x256xf32>) {eps = 1.0e-5 : f64}
      return
    }
    func.func @loop_nest(%wg: index, %a: memref<16xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c16 = arith.constant 16 : index
      %one = arith.constant 1.0 : f32
      scf.for %i = %c0 to %c16 step %c1 {
        memref.store %one, %a[%i] : memref<16xf32>
      }
      return
    }
  }
}
