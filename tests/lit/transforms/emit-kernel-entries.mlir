// RUN: nova-opt %s -nova-emit-kernel-entries -verify-each -split-input-file -verify-diagnostics | FileCheck %s

// Each kernel gets `nova_<name>(i64 wg, ptr args)`: args[i] is the i-th
// buffer; the kernel becomes internal. Declarations are left alone.
// CHECK-LABEL: llvm.func internal @k3(%{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK: llvm.func @malloc(i64) -> !llvm.ptr
// CHECK-NOT: @nova_malloc
// CHECK: llvm.func @nova_k3(%[[WG:.*]]: i64, %[[ARGS:.*]]: !llvm.ptr)
// CHECK: %[[P0:.*]] = llvm.getelementptr %[[ARGS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[A0:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[P1:.*]] = llvm.getelementptr %[[ARGS]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[A1:.*]] = llvm.load %[[P1]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @k3(%[[WG]], %[[A0]], %[[A1]])
// CHECK: llvm.return
module {
  llvm.func @k3(%wg: i64, %a: !llvm.ptr, %b: !llvm.ptr) {
    llvm.return
  }
  llvm.func @malloc(i64) -> !llvm.ptr
}

// -----

module {
  // expected-error @+1 {{nova-emit-kernel-entries: a kernel must be (i64, ptr...) -> void}}
  llvm.func @k0(%wg: i64, %a: i32) {
    llvm.return
  }
}
