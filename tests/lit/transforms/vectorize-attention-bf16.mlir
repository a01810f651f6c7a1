// RUN: nova-opt %s -nova-vectorize-attention="vector-bits=512 dot-bf16=true" -verify-each | FileCheck %s --check-prefix=DOT
// RUN: nova-opt %s -nova-vectorize-attention="vector-bits=512" -verify-each | FileCheck %s

// With bf16 matmuls asked for (the enclosing module's precision) and
// AVX512-BF16 (dot-bf16, the first RUN line), the forward's two products are
// dot products on bf16 pairs: k's pairs along the head [hd / 2, 2 T'] by
// 16 x 16 register transposes, v's pairs along the keys [T' / 2, 2 hd] by
// interleaving two rows, the block's q rows and exp(S - max) rows rounded;
// the softmax stays f32. Without the option: the f32 kernel.
// DOT-LABEL: func.func @forward_bf16
// DOT-DAG: memref.alloc() : memref<32x32xbf16>
// DOT-DAG: memref.alloc() : memref<8x128xbf16>
// DOT: vector.shuffle
// DOT: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// DOT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// DOT: math.exp %{{.*}} : vector<16xf32>
// DOT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// DOT-NOT: vector.fma
// CHECK-LABEL: func.func @forward_bf16
// CHECK-NOT: llvm.call_intrinsic

// The backward's S = scale q k^T, dP = grad v^T and dq = dS k likewise
// (k's and v's pairs along the head, no f32 k^T or v^T; k's pairs along
// the keys [T' / 2, 2 hd]; dS rounded), so its P is the forward's; dk =
// dS^T q and dv = P^T grad too, from the block's 8 rows paired: dS and P
// [4, 2 T'] each key's pairs, q and grad [4, 2 hd] each column's, a row
// before the block's first new one zeroed (arith.select). The softmax and
// dS stay f32 (the FMAs of rowsum(P dP), before dk and dv).
// DOT-LABEL: func.func @backward_bf16
// DOT-NOT: memref<64x16xf32>
// DOT: memref.alloc() : memref<32x32xbf16>
// DOT: memref.alloc() : memref<8x64xbf16>
// DOT: memref.alloc() : memref<8x16xbf16>
// DOT: memref.alloc() : memref<32x32xbf16>
// DOT: memref.alloc() : memref<8x128xbf16>
// DOT: memref.alloc() : memref<4x32xbf16>
// DOT: memref.alloc() : memref<4x32xbf16>
// DOT: memref.alloc() : memref<4x128xbf16>
// DOT: memref.alloc() : memref<4x128xbf16>
// DOT-NOT: memref<64x16xf32>
// DOT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// DOT: math.exp %{{.*}} : vector<16xf32>
// DOT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// DOT: vector.fma
// DOT: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// DOT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// DOT: arith.select %{{.*}} : vector<16xf32>
// DOT: vector.shuffle
// DOT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// DOT-NOT: vector.fma
// DOT: return
// CHECK-LABEL: func.func @backward_bf16
// CHECK-NOT: llvm.call_intrinsic
module attributes {nova.matmul_precision = "bf16"} {
  module @kernels {
    func.func @forward_bf16(%wg: index, %qkv: memref<1x16x192xf32>, %out: memref<1x16x64xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<attention, workgroups = 1, tile = [1, 1], cache_tile = [8], register_tile = [8, 64]>} {
      nova.attention_kernel ins(%qkv : memref<1x16x192xf32>) outs(%out : memref<1x16x64xf32>) {heads = 1 : i64, scale = 0.125 : f64}
      return
    }
    func.func @backward_bf16(%wg: index, %qkv: memref<1x16x192xf32>, %g: memref<1x16x64xf32>, %d: memref<1x16x192xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<attention, workgroups = 1, tile = [1, 1], cache_tile = [8], register_tile = [8, 64]>} {
      nova.attention_kernel ins(%qkv, %g : memref<1x16x192xf32>, memref<1x16x64xf32>) outs(%d : memref<1x16x192xf32>) {heads = 1 : i64, scale = 0.125 : f64, backward}
      return
    }
  }
}
