// The shared stages on a small MLP: the step becomes a launch plan (allocs
// and launches over its buffers) and every compute op a configured kernel of
// module @kernels: here one, the matmul with the fill of its result and the
// fused bias + GELU as its epilogue.
// RUN: nova-opt %s -nova-lower-to-kernels -verify-each | FileCheck %s
// And the CPU tail: only LLVM-dialect kernels with runtime entries are left.
// RUN: nova-opt %s -nova-lower-to-kernels -nova-cpu-codegen -verify-each | FileCheck %s --check-prefix=CPU

// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %{{.*}}: memref<4x8xf32>, %{{.*}}: memref<8x3xf32>, %{{.*}}: memref<3xf32>, %{{.*}}: memref<4x3xf32>)
// CHECK-NOT: linalg.
// CHECK: memref.alloc
// CHECK: nova.launch @kernels::@k0
// CHECK-NOT: nova.launch
// CHECK-NOT: memref.dealloc
// CHECK: return
// CHECK: module @kernels
// CHECK: func.func @k0(%{{.*}}: index, {{.*}}nova.lowering_config = #nova.lowering_config<matmul,
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} attrs = {nova.kernel = "matmul"}
// CHECK: linalg.generic
// CHECK: math.tanh

// CPU-LABEL: module @kernels
// CPU-NOT: linalg.
// CPU-NOT: memref.
// CPU-NOT: func.func
// CPU: llvm.func internal @k0(
// CPU: llvm.func @nova_k0(%{{.*}}: i64, %{{.*}}: !llvm.ptr)
func.func @mlp(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %b: tensor<3xf32>) -> tensor<4x3xf32> {
  %0 = nova.matmul %x, %w : tensor<4x8xf32>, tensor<8x3xf32>
  %1 = nova.broadcast %b : tensor<3xf32> -> tensor<4x3xf32>
  %2 = nova.add %0, %1 : tensor<4x3xf32>, tensor<4x3xf32>
  %3 = nova.gelu %2 : tensor<4x3xf32>
  return %3 : tensor<4x3xf32>
}
