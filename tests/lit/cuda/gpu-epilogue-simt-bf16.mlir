// With bf16 matmuls, a qkv product the tensor-core kernels refuse (the
// lhs's rows of 30 bf16 are not whole 16-byte chunks) runs as the simt
// kernel with its bias add and the rounding of qkv to bf16 (attention
// reads it as it is, GpuBf16Operands.cpp) as its epilogue: the kernel
// stores the op's bf16 results, 4 adjacent columns a vector store.
// RUN: env NOVA_TARGET=sm_86 nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s
// RUN: env NOVA_TARGET=sm_86 nova-opt %s -nova-lower-to-kernels -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_86}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @linear
// CHECK: %[[QKV:.*]] = memref.alloc() {{.*}} : memref<64x48xbf16>
// CHECK-NEXT: nova.launch @kernels::@[[K:k[0-9]+]](%{{.*}}, %{{.*}}, %arg2, %[[QKV]])
// CHECK-NEXT: nova.launch @kernels::@{{k[0-9]+}}(%[[QKV]], %arg3) : memref<64x48xbf16>, memref<2x32x16xf32>
// CHECK: func.func @[[K]]({{.*}}nova.gpu_epilogue = array<i64: 3, 2>
// CHECK-SAME: "generated as the simt kernel over {{.*}}; the elementwise op after it fused (run on each result before its store)"
// CHECK-SAME: its result written as bf16

// GPU: gpu.func @nova_[[K:k[0-9]+]](%arg0: memref<64x30xbf16>, %arg1: memref<30x48xbf16>, %arg2: memref<48xf32>, %arg3: memref<64x48xbf16>) kernel
// GPU: %[[BV:.*]] = vector.load %arg2[%{{.*}}] : memref<48xf32>, vector<4xf32>
// GPU: %[[B:.*]] = vector.extract %[[BV]][0] : f32 from vector<4xf32>
// GPU: %[[S:.*]] = arith.addf %{{.*}}, %[[B]] : f32
// GPU-NEXT: arith.truncf %[[S]] : f32 to bf16
// GPU: vector.store %{{.*}}, %arg3[%{{.*}}, %{{.*}}] : memref<64x48xbf16>, vector<4xbf16>
// GPU: gpu.return
module attributes {nova.matmul_precision = "bf16"} {
  func.func @linear(%x: tensor<64x30xf32>, %w: tensor<30x48xf32>, %b: tensor<48xf32>) -> tensor<2x32x16xf32> {
    %0 = nova.matmul %x, %w : tensor<64x30xf32>, tensor<30x48xf32>
    %1 = nova.broadcast %b : tensor<48xf32> -> tensor<64x48xf32>
    %2 = nova.add %0, %1 : tensor<64x48xf32>, tensor<64x48xf32>
    %qkv = nova.reshape %2 : tensor<64x48xf32> -> tensor<2x32x48xf32>
    %o = nova.causal_attention %qkv {heads = 1 : i64, scale = 0.25 : f64} : tensor<2x32x48xf32> -> tensor<2x32x16xf32>
    return %o : tensor<2x32x16xf32>
  }
}
