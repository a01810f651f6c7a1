// RUN: nova-opt %s -nova-approximate-math -verify-each | FileCheck %s

// f32 transcendentals (scalars and vectors) become inline polynomials: no
// math.tanh, math.exp, math.log or math.erf is left, only arithmetic.
// CHECK-LABEL: func.func @f32_ops
// CHECK-NOT: math.tanh
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK-NOT: math.erf
// CHECK: arith.mulf
// CHECK: return
func.func @f32_ops(%x: f32, %v: vector<16xf32>) -> (f32, vector<16xf32>, f32, f32) {
  %0 = math.tanh %x : f32
  %1 = math.exp %v : vector<16xf32>
  %2 = math.log %x : f32
  %3 = math.erf %x : f32
  return %0, %1, %2, %3 : f32, vector<16xf32>, f32, f32
}

// f64 keeps libm's accuracy: the ops stay for the later lowering.
// CHECK-LABEL: func.func @f64_ops
// CHECK: math.tanh %{{.*}} : f64
// CHECK: math.exp %{{.*}} : f64
// CHECK: math.erf %{{.*}} : f64
func.func @f64_ops(%x: f64) -> (f64, f64, f64) {
  %0 = math.tanh %x : f64
  %1 = math.exp %x : f64
  %2 = math.erf %x : f64
  return %0, %1, %2 : f64, f64, f64
}
