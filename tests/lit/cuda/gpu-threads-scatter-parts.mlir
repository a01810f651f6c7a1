// A scatter-add of 2048 updates into a 256 x 256 table (an embedding's
// gradient) is three kernels: the 32 parts' own tables zeroed, 64 indices
// a part added into table p (its loop over parts marked, one part a block:
// 32 blocks of a thread a column), then each element's 32 parts added in
// part order into the result (which the fill before gives its start). The
// mapped kernel takes its part from its block and indexes the workspace
// with it. 100 updates stay one kernel on one block.
// RUN: nova-opt %s -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each | FileCheck %s
// RUN: nova-opt %s -nova-gpu-threads="target=sm_80 side-by-side=0" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=GPU

// CHECK-LABEL: func.func @emb_grad
// CHECK-NEXT: %[[TABLES:.*]] = memref.alloc() {alignment = 64 : i64} : memref<32x256x256xf32>
// CHECK-NEXT: nova.launch @kernels::@k1_zero(%[[TABLES]]) : memref<32x256x256xf32>
// CHECK-NEXT: nova.launch @kernels::@k1(%arg0, %arg1, %[[TABLES]]) : memref<2048xi32>, memref<2048x256xf32>, memref<32x256x256xf32>
// CHECK-NEXT: nova.launch @kernels::@k1_total(%[[TABLES]], %arg2) : memref<32x256x256xf32>, memref<256x256xf32>
// CHECK-NEXT: nova.launch @kernels::@k2(
// CHECK-NEXT: return
// CHECK: func.func @k1({{.*}}nova.gpu_scatter_parts = 32 : i64{{.*}}"threads: 256 columns of a scatter-add (one unit a thread) over 32 blocks of 256"
// CHECK: scf.for %[[P:.*]] = %{{.*}} to %{{.*}} step
// CHECK: scf.for
// CHECK: memref.load %{{.*}}[%[[P]], %{{.*}}, %{{.*}}] : memref<32x256x256xf32>
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[P]], %{{.*}}, %{{.*}}] : memref<32x256x256xf32>
// CHECK: } {nova.split_loop}
// CHECK: } {nova.gpu_part_loop}
// CHECK: func.func @k1_zero(
// CHECK: linalg.fill
// CHECK: func.func @k1_total({{.*}}nova.gpu_output_init = 0.000000e+00 : f32
// CHECK: iterator_types = ["reduction", "parallel", "parallel"]
// CHECK: func.func @k2({{.*}}"threads: 40 columns of a scatter-add (one unit a thread) over 1 blocks of 64"

// GPU: gpu.func @nova_k1(%{{.*}}: memref<2048xi32>, %{{.*}}: memref<2048x256xf32>, %[[WS:.*]]: memref<32x256x256xf32>)
// GPU: %[[BLOCK:.*]] = gpu.block_id  x
// GPU-NOT: gpu.func
// GPU: memref.load %[[WS]][%[[BLOCK]], %{{.*}}, %{{.*}}] : memref<32x256x256xf32>
// GPU: memref.store %{{.*}}, %[[WS]][%[[BLOCK]], %{{.*}}, %{{.*}}] : memref<32x256x256xf32>
module {
  func.func @emb_grad(%arg0: memref<2048xi32>, %arg1: memref<2048x256xf32>, %arg2: memref<256x256xf32>, %arg3: memref<100xi32>, %arg4: memref<100x40xf32>, %arg5: memref<40x40xf32>) {
    nova.launch @kernels::@k0(%arg2) : memref<256x256xf32>
    nova.launch @kernels::@k1(%arg0, %arg1, %arg2) : memref<2048xi32>, memref<2048x256xf32>, memref<256x256xf32>
    nova.launch @kernels::@k2(%arg3, %arg4, %arg5) : memref<100xi32>, memref<100x40xf32>, memref<40x40xf32>
    return
  }
  module @kernels {
    func.func @k0(%arg0: index, %arg1: memref<256x256xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0, 0], register_tile = []>} {
      %cst = arith.constant 0.000000e+00 : f32
      linalg.fill ins(%cst : f32) outs(%arg1 : memref<256x256xf32>)
      return
    }
    func.func @k1(%arg0: index, %arg1: memref<2048xi32>, %arg2: memref<2048x256xf32>, %arg3: memref<256x256xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0], register_tile = []>} {
      %c256 = arith.constant 256 : index
      %c2048 = arith.constant 2048 : index
      %c1 = arith.constant 1 : index
      %c0 = arith.constant 0 : index
      scf.for %n = %c0 to %c2048 step %c1 {
        %i = memref.load %arg1[%n] : memref<2048xi32>
        %row = arith.index_cast %i : i32 to index
        %ge = arith.cmpi sge, %row, %c0 : index
        %lt = arith.cmpi slt, %row, %c256 : index
        %in = arith.andi %ge, %lt : i1
        scf.if %in {
          scf.for %d = %c0 to %c256 step %c1 {
            %u = memref.load %arg2[%n, %d] : memref<2048x256xf32>
            %old = memref.load %arg3[%row, %d] : memref<256x256xf32>
            %sum = arith.addf %old, %u : f32
            memref.store %sum, %arg3[%row, %d] : memref<256x256xf32>
          } {nova.split_loop}
        }
      }
      return
    }
    func.func @k2(%arg0: index, %arg1: memref<100xi32>, %arg2: memref<100x40xf32>, %arg3: memref<40x40xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0], register_tile = []>} {
      %c40 = arith.constant 40 : index
      %c100 = arith.constant 100 : index
      %c1 = arith.constant 1 : index
      %c0 = arith.constant 0 : index
      scf.for %n = %c0 to %c100 step %c1 {
        %i = memref.load %arg1[%n] : memref<100xi32>
        %row = arith.index_cast %i : i32 to index
        %ge = arith.cmpi sge, %row, %c0 : index
        %lt = arith.cmpi slt, %row, %c40 : index
        %in = arith.andi %ge, %lt : i1
        scf.if %in {
          scf.for %d = %c0 to %c40 step %c1 {
            %u = memref.load %arg2[%n, %d] : memref<100x40xf32>
            %old = memref.load %arg3[%row, %d] : memref<40x40xf32>
            %sum = arith.addf %old, %u : f32
            memref.store %sum, %arg3[%row, %d] : memref<40x40xf32>
          } {nova.split_loop}
        }
      }
      return
    }
  }
}
