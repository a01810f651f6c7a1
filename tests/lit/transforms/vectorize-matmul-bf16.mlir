// RUN: nova-opt %s -nova-vectorize-matmul -verify-each -split-input-file | FileCheck %s

// A 64 x 64 x 128 matmul on AMX, one workgroup of 64 x 64, kc = 64 (two
// slabs): the stack holds one 32-row strip of packed lhs (32 x 64 bf16)
// and the rhs slab in k-pairs (32 x 128 bf16). Per slab: rhs rows k and k + 1 rounded
// and interleaved into 32 bf16; per strip its lhs rows rounded 16 lanes at
// a time, then for each 32 x 32 block on the first slab four zero tiles,
// on the others the four tiles of the result, and kc / 32 = 2 steps of
// 2 lhs + 2 rhs tile loads and 4 products (8 in all), the tiles back into
// the result. The zero fill is folded in; without an epilogue nothing
// reads the sums back.
// CHECK-LABEL: func @amx
// CHECK-DAG: memref.alloca() {alignment = 64 : i64} : memref<32x64xbf16>
// CHECK-DAG: memref.alloca() {alignment = 64 : i64} : memref<32x128xbf16>
// CHECK-NOT: linalg.fill
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17, 2, 18
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: scf.if
// CHECK-COUNT-4: amx.tile_zero : vector<16x16xf32>
// CHECK-COUNT-8: amx.tile_mulf
// CHECK-COUNT-4: amx.tile_store %{{.*}} : memref<64x64xf32>, vector<16x16xf32>
// CHECK: } else {
// CHECK-COUNT-4: amx.tile_load %{{.*}} : memref<64x64xf32> into vector<16x16xf32>
// CHECK: amx.tile_load %{{.*}} : memref<32x64xbf16> into vector<16x32xbf16>
// CHECK: amx.tile_load %{{.*}} : memref<32x128xbf16> into vector<16x32xbf16>
// CHECK-COUNT-8: amx.tile_mulf
// CHECK-COUNT-4: amx.tile_store
// CHECK-NOT: vector.load %{{.*}} : memref<64x64xf32>
// CHECK-NOT: linalg.generic
module {
  module @kernels {
    func.func @amx(%wg: index, %a: memref<64x128xf32>, %b: memref<128x64xf32>, %c: memref<64x64xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<amx_matmul, workgroups = 1, tile = [64, 64], cache_tile = [64], register_tile = [32, 32]>} {
      %zero = arith.constant 0.0 : f32
      linalg.fill ins(%zero : f32) outs(%c : memref<64x64xf32>)
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<64x128xf32>, memref<128x64xf32>) outs(%c : memref<64x64xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
  }
}

// -----

// A 40 x 70 result: the one whole 32 x 32 block on the tiles, the 8 rows
// below it and the 38 columns right of it as copies of the generic on
// subviews (float32).
// CHECK-LABEL: func @edges
// CHECK: amx.tile_mulf
// CHECK: memref.subview
// CHECK: linalg.generic
// CHECK: memref.subview
// CHECK: linalg.generic
// CHECK-NOT: linalg.generic
module {
  module @kernels {
    func.func @edges(%wg: index, %a: memref<40x32xf32>, %b: memref<32x70xf32>, %c: memref<40x70xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<amx_matmul, workgroups = 1, tile = [64, 96], cache_tile = [32], register_tile = [32, 32]>} {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<40x32xf32>, memref<32x70xf32>) outs(%c : memref<40x70xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
  }
}

// -----

// The same 64 x 64 x 128 matmul as AVX512-BF16 dot products (kind
// bf16_matmul, no AMX): the same stack buffers and packing; per 32 x 32
// block, 4 register blocks of 8 rows x 2 vectors, 16 accumulators (zero on
// the first slab, from the result on the others) carried through the slab's
// 32 k-pairs, each pair 2 loads of 32 packed rhs bf16 (16 columns' pairs),
// then per row its lhs pair as one 32-bit word in every lane and 2
// vdpbf16ps; the sums back into the result.
// CHECK-LABEL: func @dot
// CHECK-DAG: memref.alloca() {alignment = 64 : i64} : memref<32x64xbf16>
// CHECK-DAG: memref.alloca() {alignment = 64 : i64} : memref<32x128xbf16>
// CHECK-NOT: linalg.fill
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17, 2, 18
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: scf.if
// CHECK-COUNT-16: arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-2: vector.load %{{.*}} : memref<32x128xbf16>, vector<32xbf16>
// CHECK: vector.load %{{.*}} : memref<32x64xbf16>, vector<2xbf16>
// CHECK: vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
// CHECK: vector.broadcast %{{.*}} : i32 to vector<16xi32>
// CHECK: vector.bitcast %{{.*}} : vector<16xi32> to vector<32xbf16>
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%{{.*}}) : (vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>
// CHECK: scf.yield
// CHECK-COUNT-16: vector.store %{{.*}} : memref<64x64xf32>, vector<16xf32>
// CHECK: } else {
// CHECK-COUNT-16: vector.load %{{.*}} : memref<64x64xf32>, vector<16xf32>
// CHECK: scf.for
// CHECK-COUNT-16: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// CHECK-NOT: amx.
// CHECK-NOT: linalg.generic
module {
  module @kernels {
    func.func @dot(%wg: index, %a: memref<64x128xf32>, %b: memref<128x64xf32>, %c: memref<64x64xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<bf16_matmul, workgroups = 1, tile = [64, 64], cache_tile = [64], register_tile = [8, 32]>} {
      %zero = arith.constant 0.0 : f32
      linalg.fill ins(%zero : f32) outs(%c : memref<64x64xf32>)
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<64x128xf32>, memref<128x64xf32>) outs(%c : memref<64x64xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
  }
}

// -----

// One slab (K = 64 = kc) with a zero fill and a bias epilogue, as dot
// products: no first-slab branch; the sums go from the registers through
// the epilogue into its output, so the result is neither loaded nor stored
// (nova-drop-unstored-results may take it out of the kernel).
// CHECK-LABEL: func @dot_epilogue
// CHECK-SAME: %[[C:arg4]]: memref<64x64xf32>, %[[D:arg5]]: memref<64x64xf32>
// CHECK-NOT: scf.if %{{[0-9a-z_]+}} {
// CHECK-NOT: %[[C]][
// CHECK: scf.for %{{.*}} iter_args
// CHECK-NOT: %[[C]][
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// CHECK: scf.yield
// CHECK: vector.load %{{.*}} : memref<64xf32>, vector<16xf32>
// CHECK: arith.addf %{{.*}} : vector<16xf32>
// CHECK: vector.store %{{.*}}, %[[D]][{{.*}}] : memref<64x64xf32>, vector<16xf32>
// CHECK-NOT: %[[C]][
// CHECK-NOT: linalg.generic
module {
  module @kernels {
    func.func @dot_epilogue(%wg: index, %a: memref<64x64xf32>, %b: memref<64x64xf32>, %bias: memref<64xf32>,
                            %c: memref<64x64xf32>, %d: memref<64x64xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<bf16_matmul, workgroups = 1, tile = [64, 64], cache_tile = [64], register_tile = [8, 32]>} {
      %zero = arith.constant 0.0 : f32
      linalg.fill ins(%zero : f32) outs(%c : memref<64x64xf32>)
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (n)>, affine_map<(m, n) -> (m, n)>],
                      iterator_types = ["parallel", "parallel"]}
          ins(%c, %bias : memref<64x64xf32>, memref<64xf32>) outs(%d : memref<64x64xf32>) {
      ^bb0(%x: f32, %y: f32, %o: f32):
        %s = arith.addf %x, %y : f32
        linalg.yield %s : f32
      }
      return
    }
  }
}

// -----

// The same with the epilogue rounding its result to bf16 (the qkv copy
// attention reads, nova-bf16-attention-qkv): the sums go through the bias
// add and the rounding from the registers into the bf16 output, 16 lanes
// at a time; the f32 result is neither loaded nor stored.
// CHECK-LABEL: func @dot_narrowing_epilogue
// CHECK-SAME: %[[C:arg4]]: memref<64x64xf32>, %[[D:arg5]]: memref<64x64xbf16>
// CHECK-NOT: %[[C]][
// CHECK: scf.for %{{.*}} iter_args
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// CHECK: scf.yield
// CHECK: arith.addf %{{.*}} : vector<16xf32>
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.store %{{.*}}, %[[D]][{{.*}}] : memref<64x64xbf16>, vector<16xbf16>
// CHECK-NOT: %[[C]][
// CHECK-NOT: linalg.generic
module {
  module @kernels {
    func.func @dot_narrowing_epilogue(%wg: index, %a: memref<64x64xf32>, %b: memref<64x64xf32>, %bias: memref<64xf32>,
                                      %c: memref<64x64xf32>, %d: memref<64x64xbf16>)
        attributes {nova.lowering_config = #nova.lowering_config<bf16_matmul, workgroups = 1, tile = [64, 64], cache_tile = [64], register_tile = [8, 32]>} {
      %zero = arith.constant 0.0 : f32
      linalg.fill ins(%zero : f32) outs(%c : memref<64x64xf32>)
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %y: f32, %acc: f32):
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (n)>, affine_map<(m, n) -> (m, n)>],
                      iterator_types = ["parallel", "parallel"]}
          ins(%c, %bias : memref<64x64xf32>, memref<64xf32>) outs(%d : memref<64x64xbf16>) {
      ^bb0(%x: f32, %y: f32, %o: bf16):
        %s = arith.addf %x, %y : f32
        %t = arith.truncf %s : f32 to bf16
        linalg.yield %t : bf16
      }
      return
    }
  }
}

// -----

// A lhs computed by a fused producer (its exp) as dot products: each 16
// values of a lhs row along k are the producer's on 16 loaded inputs,
// rounded to bf16 into the packed strip; the k past them (K = 40 = 2 x 16
// + 8) one at a time, the producer on one lane. The packed strip is read
// as before.
// CHECK-LABEL: func @dot_prologue
// CHECK: vector.load %{{.*}} : memref<32x40xf32>, vector<16xf32>
// CHECK: math.exp %{{.*}} : vector<16xf32>
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.load %{{.*}} : memref<32x40xf32>, vector<1xf32>
// CHECK: math.exp %{{.*}} : vector<1xf32>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
module {
  module @kernels {
    func.func @dot_prologue(%wg: index, %a: memref<32x40xf32>, %b: memref<40x32xf32>, %c: memref<32x32xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<bf16_matmul, workgroups = 1, tile = [32, 32], cache_tile = [64], register_tile = [8, 32]>} {
      linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                      iterator_types = ["parallel", "reduction", "parallel"]}
          ins(%a, %b : memref<32x40xf32>, memref<40x32xf32>) outs(%c : memref<32x32xf32>) attrs = {nova.kernel = "matmul"} {
      ^bb0(%x: f32, %w: f32, %acc: f32):
        %e = math.exp %x : f32
        %p = arith.mulf %e, %w : f32
        %s = arith.addf %acc, %p : f32
        linalg.yield %s : f32
      }
      return
    }
  }
}
