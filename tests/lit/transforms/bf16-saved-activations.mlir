// RUN: nova-opt %s -nova-autodiff -canonicalize -cse -nova-lower-to-linalg -canonicalize -nova-fuse-elementwise -nova-bf16-saved-activations="kept-ops=3" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-autodiff -canonicalize -cse -nova-lower-to-linalg -canonicalize -nova-fuse-elementwise -nova-bf16-saved-activations -verify-each | FileCheck %s --check-prefix=NEAR
// RUN: nova-opt %s -nova-autodiff -canonicalize -cse -verify-each | FileCheck %s --check-prefix=MARK

// With activations in bf16 asked for (nova.activation_precision), nova-autodiff
// marks the forward's products (not the gradients' products: the MARK run), and a
// forward product's output with its bias add fused (h, the GELU's input),
// read only by elementwise ops, the last of them kept-ops ops or more after
// it, is made in bf16: the bias add rounds what it yields (arith.truncf) into
// a bf16 tensor, and its readers (the GELU forward, the GELU's gradient) widen
// it (arith.extf). The GELU's output, which products read, stays f32; so do the
// gradients' products and the loss. The mark is gone afterwards. With the
// default distance (16 ops) this step is too short: nothing changes (NEAR).
// MARK-LABEL: func.func @mlp
// MARK: nova.matmul %arg0, %arg1 {nova.forward_product}
// MARK: nova.matmul %{{.*}}, %arg3 {nova.forward_product}
// MARK-NOT: nova.forward_product
// MARK: return
// CHECK-LABEL: func.func @mlp
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8x16xf32>) {{.*}} attrs = {nova.kernel = "matmul"}
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x16xbf16>
// CHECK: %[[H:.*]] = linalg.generic {{.*}} ins(%[[P]], %arg2 : tensor<4x16xf32>, tensor<16xf32>) outs(%[[E]] : tensor<4x16xbf16>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: bf16):
// CHECK-NEXT: %[[S:.*]] = arith.addf
// CHECK-NEXT: %[[R:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[R]] : bf16
// CHECK: %[[A:.*]] = linalg.generic {{.*}} ins(%[[H]] : tensor<4x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT: arith.extf %[[IN]] : bf16 to f32
// CHECK: math.tanh
// CHECK: linalg.generic {{.*}} ins(%[[A]], %arg3 : tensor<4x16xf32>, tensor<16x3xf32>) {{.*}} attrs = {nova.kernel = "matmul"}
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[H]] : tensor<4x16xf32>, tensor<4x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %[[IN2:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT: arith.extf %[[IN2]] : bf16 to f32
// CHECK-NOT: nova.forward_product
// CHECK: return %{{.*}} : tensor<f32>, tensor<8x16xf32>, tensor<16x3xf32>
// NEAR-LABEL: func.func @mlp
// NEAR-NOT: xbf16
// NEAR-NOT: nova.forward_product
// NEAR: return
module attributes {nova.activation_precision = "bf16"} {
  func.func @mlp(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %b: tensor<16xf32>, %w2: tensor<16x3xf32>)
      -> (tensor<f32>, tensor<8x16xf32>, tensor<16x3xf32>) {
    %p = nova.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>
    %bb = nova.broadcast %b : tensor<16xf32> -> tensor<4x16xf32>
    %h = nova.add %p, %bb : tensor<4x16xf32>, tensor<4x16xf32>
    %a = nova.gelu %h : tensor<4x16xf32>
    %y = nova.matmul %a, %w2 : tensor<4x16xf32>, tensor<16x3xf32>
    %l = nova.reduce_sum %y {axes = array<i64: 0, 1>} : tensor<4x3xf32>
    %g:2 = nova.gradient %l wrt %w1, %w2 : tensor<f32>, tensor<8x16xf32>, tensor<16x3xf32>
    return %l, %g#0, %g#1 : tensor<f32>, tensor<8x16xf32>, tensor<16x3xf32>
  }
}
