// RUN: nova-opt %s -nova-configure-kernels="vector-bits=512 cores=2 amx-bf16=true" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-configure-kernels="vector-bits=512 cores=2" -verify-each | FileCheck %s --check-prefix=NOAMX
// RUN: nova-opt %s -nova-configure-kernels="vector-bits=512 cores=2 avx512-bf16=true" -verify-each | FileCheck %s --check-prefix=DOT
// RUN: nova-opt %s -nova-configure-kernels="vector-bits=512 cores=2 amx-bf16=true avx512-bf16=true" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-configure-kernels="vector-bits=256 vector-registers=16 cores=2 avx512-bf16=true" -verify-each | FileCheck %s --check-prefix=NOAMX

// The module asks for bf16 matmuls. With AMX: a 2048x768x256 f32 matmul
// takes the tiles, kc = K = 256 (at most 512). Packing bounds it: the rhs
// slab (256 x 768 bf16, 384 KiB, within half of L2) is packed once per
// block, each strip's lhs once per block; two workgroups for the two cores,
// split by rows (packs the rhs twice: 2048 + 2 x 768 rows of K) rather
// than by columns (the lhs twice: 2 x 2048 + 768).
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: #nova.lowering_config<amx_matmul, workgroups = 2, tile = [1024, 768], cache_tile = [256], register_tile = [32, 32]>
// NOAMX-LABEL: func.func @matmul
// NOAMX-SAME: #nova.lowering_config<matmul,
// Without AMX but with AVX512-BF16 (the last RUN lines: AMX wins where
// both are there; 256-bit vectors take neither): the same blocks, the
// products as dot products in 8 x 32 register blocks.
// DOT-LABEL: func.func @matmul
// DOT-SAME: #nova.lowering_config<bf16_matmul, workgroups = 2, tile = [1024, 768], cache_tile = [256], register_tile = [8, 32]>
// A result narrower than one 32-column block: float32 FMAs.
// CHECK-LABEL: func.func @narrow
// CHECK-SAME: #nova.lowering_config<matmul,
// A K of 1100: 3 slabs of 384 (367 rounded up to a multiple of 32); a
// 64 x 64 result in 32-row blocks, so that both cores have one.
// CHECK-LABEL: func.func @deep
// CHECK-SAME: #nova.lowering_config<amx_matmul, workgroups = 2, tile = [32, 64], cache_tile = [384], register_tile = [32, 32]>
// DOT-LABEL: func.func @narrow
// DOT-SAME: #nova.lowering_config<matmul,
// DOT-LABEL: func.func @deep
// DOT-SAME: #nova.lowering_config<bf16_matmul, workgroups = 2, tile = [32, 64], cache_tile = [384], register_tile = [8, 32]>
// K = 512 over 3072 columns: the rhs slab's cap (half of the 2 MiB L2,
// 512 x 1024 bf16) makes at least 3 column blocks, which 2 cores cannot
// share evenly (2048 and 1024 columns); 4 blocks of 768 can.
// CHECK-LABEL: func.func @wide
// CHECK-SAME: #nova.lowering_config<amx_matmul, workgroups = 4, tile = [2048, 768], cache_tile = [512], register_tile = [32, 32]>
// DOT-LABEL: func.func @wide
// DOT-SAME: #nova.lowering_config<bf16_matmul, workgroups = 4, tile = [2048, 768], cache_tile = [512], register_tile = [8, 32]>
module attributes {nova.matmul_precision = "bf16"} {
  module @kernels {
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
    func.func @narrow(%wg: index, %a: memref<256x256xf32>, %b: memref<256x16xf32>, %c: memref<256x16xf32>) {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<256x256xf32>, memref<256x16xf32>) outs(%c : memref<256x16xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
    func.func @deep(%wg: index, %a: memref<64x1100xf32>, %b: memref<1100x64xf32>, %c: memref<64x64xf32>) {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<64x1100xf32>, memref<1100x64xf32>) outs(%c : memref<64x64xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
    func.func @wide(%wg: index, %a: memref<2048x512xf32>, %b: memref<512x3072xf32>, %c: memref<2048x3072xf32>) {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<2048x512xf32>, memref<512x3072xf32>) outs(%c : memref<2048x3072xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
  }
}
