// With bf16 matmuls, a qkv that only attention kernels read (the forward
// and the gradient, through a reshape) is read as a bf16 copy: they round
// q, k and v to bf16 as they stage them anyway. The copy's rounding fuses
// into the bias add, which stays the qkv product's epilogue
// (nova-outline-kernels keeps a matmul with an elementwise op whose result
// is a narrower float in one kernel on a GPU): one launch writes qkv in
// bf16, no f32 qkv exists, and attention's kernels copy its tiles as they
// are (cp.async of 8 bf16, no f32 rows rounded). A qkv a product also
// reads (%qkv2, read by the last matmul) stays f32.
// RUN: env NOVA_TARGET=sm_80 nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s
// RUN: env NOVA_TARGET=sm_80 nova-opt %s -nova-lower-to-kernels -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=MAP

// CHECK-LABEL: func.func @qkv
// CHECK: %[[QKV:.*]] = memref.alloc() {{.*}} : memref<64x96xbf16>
// CHECK-NEXT: nova.launch @kernels::@[[MM:k[0-9_]+]](%{{.*}}, %{{.*}}, %arg2, %[[QKV]])
// CHECK: nova.launch @kernels::@[[FWD:k[0-9]+]](%[[QKV]], %{{.*}}, %{{.*}}) : memref<64x96xbf16>,
// CHECK: nova.launch @kernels::@[[BWD:k[0-9]+]](%[[QKV]], %arg3, %arg6,
// CHECK-NEXT: nova.launch @kernels::@[[BWD]]_keys(%[[QKV]], %arg3, %arg6,
// The second qkv, which a product also reads, stays f32.
// CHECK: nova.launch @kernels::@{{k[0-9_]+}}(%[[P2:.*]], %{{.*}}, %{{.*}}) : memref<64x96xf32>,
// CHECK: nova.launch @kernels::@{{k[0-9]+}}(%[[P2]], %{{.*}}) : memref<64x96xf32>, memref<2x32x32xf32>
// CHECK: return
// CHECK: func.func @[[MM]]({{.*}}, %{{.*}}: memref<64x96xbf16>) attributes {{{.*}}nova.gpu_epilogue
// CHECK-SAME: its result written as bf16
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: func.func @[[FWD]]({{.*}}: memref<64x96xbf16>,
// CHECK-SAME: nova.gpu_attention_mma = "bf16"
// CHECK-NEXT: memref.expand_shape
// CHECK-NEXT: nova.attention_kernel ins(%{{.*}} : memref<2x32x96xbf16>)

// The forward: 16-byte copies of 8 bf16 straight into the tiles, none of
// 4 f32 into a staging buffer.
// MAP: func.func @{{k[0-9]+}}({{.*}}memref<64x96xbf16>{{.*}}) attributes {{{.*}}nova.gpu_attention_mma = "bf16"
// MAP-NOT: func.func
// MAP: nvgpu.device_async_copy {{.*}}, 8 {bypassL1} : memref<2x32x96xbf16> to memref<64x32xbf16, #gpu.address_space<workgroup>>
// MAP-NOT: , 4 {bypassL1}
// MAP: func.func
module attributes {nova.matmul_precision = "bf16"} {
  func.func @qkv(%x: tensor<64x32xf32>, %w: tensor<32x96xf32>, %b: tensor<96xf32>, %dy: tensor<2x32x32xf32>,
                 %w2: tensor<32x96xf32>)
      -> (tensor<2x32x32xf32>, tensor<2x32x96xf32>, tensor<64x96xf32>) {
    %p = nova.matmul %x, %w : tensor<64x32xf32>, tensor<32x96xf32>
    %bb = nova.broadcast %b : tensor<96xf32> -> tensor<64x96xf32>
    %pb = nova.add %p, %bb : tensor<64x96xf32>, tensor<64x96xf32>
    %qkv = nova.reshape %pb : tensor<64x96xf32> -> tensor<2x32x96xf32>
    %o = nova.causal_attention %qkv {heads = 1 : i64, scale = 0.125 : f64} : tensor<2x32x96xf32> -> tensor<2x32x32xf32>
    %dqkv = nova.causal_attention_grad %qkv, %dy {heads = 1 : i64, scale = 0.125 : f64} : tensor<2x32x96xf32>, tensor<2x32x32xf32>
    %p2 = nova.matmul %x, %w2 : tensor<64x32xf32>, tensor<32x96xf32>
    %qkv2 = nova.reshape %p2 : tensor<64x96xf32> -> tensor<2x32x96xf32>
    %o2 = nova.causal_attention %qkv2 {heads = 1 : i64, scale = 0.125 : f64} : tensor<2x32x96xf32> -> tensor<2x32x32xf32>
    %o2r = nova.reshape %o2 : tensor<2x32x32xf32> -> tensor<64x32xf32>
    %q2w = nova.matmul %o2r, %w2 : tensor<64x32xf32>, tensor<32x96xf32>
    %s = nova.add %q2w, %p2 : tensor<64x96xf32>, tensor<64x96xf32>
    %sum = nova.add %o, %o2 : tensor<2x32x32xf32>, tensor<2x32x32xf32>
    return %sum, %dqkv, %s : tensor<2x32x32xf32>, tensor<2x32x96xf32>, tensor<64x96xf32>
  }
}
