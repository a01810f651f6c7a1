// RUN: nova-opt %s -nova-distribute-workgroups -verify-each -split-input-file -verify-diagnostics | FileCheck %s

// 10 rows in tiles of 4: workgroups 0, 1, 2 own rows [0, 4), [4, 8), [8, 10).
// The tile loop runs once, from wg * 4 to min(wg * 4 + 4, 10).
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%[[WG:.*]]: index,
// CHECK-DAG: %[[T:.*]] = arith.constant 4 : index
// CHECK-DAG: %[[E:.*]] = arith.constant 10 : index
// CHECK: %[[LO:.*]] = arith.muli %[[WG]], %[[T]]
// CHECK: %[[END:.*]] = arith.addi %[[LO]], %[[T]]
// CHECK: %[[HI:.*]] = arith.minui %[[END]], %[[E]]
// CHECK: scf.for %[[I:.*]] = %[[LO]] to %[[HI]] step %[[T]]
// CHECK: memref.subview %{{.*}}[%[[I]], 0]
// CHECK: linalg.generic
module {
  module @kernels {
    func.func @rows(%wg: index, %a: memref<10x16xf32>, %b: memref<10x16xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 3, tile = [4, 0], register_tile = []>} {
      linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
          ins(%a : memref<10x16xf32>) outs(%b : memref<10x16xf32>) {
      ^bb0(%x: f32, %y: f32):
        %e = math.exp %x : f32
        linalg.yield %e : f32
      }
      return
    }
  }
}

// -----

// Two split loops: wg is row-major over (2 row tiles, 3 column tiles).
// CHECK-LABEL: func.func @grid
// CHECK-SAME: (%[[WG:.*]]: index,
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: %[[COL:.*]] = arith.remui %[[WG]], %[[C3]]
// CHECK: %[[ROW:.*]] = arith.divui %[[WG]], %[[C3]]
// CHECK: scf.for
// CHECK: scf.for
// CHECK: linalg.fill
module {
  module @kernels {
    func.func @grid(%wg: index, %a: memref<8x12xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 6, tile = [4, 4], register_tile = []>} {
      %c = arith.constant 0.0 : f32
      linalg.fill ins(%c : f32) outs(%a : memref<8x12xf32>)
      return
    }
  }
}

// -----

// One workgroup, or another kind: nothing changes.
// CHECK-LABEL: func.func @whole
// CHECK-NOT: scf.for
// CHECK: linalg.fill
module {
  module @kernels {
    func.func @whole(%wg: index, %a: memref<8xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0], register_tile = []>} {
      %c = arith.constant 0.0 : f32
      linalg.fill ins(%c : f32) outs(%a : memref<8xf32>)
      return
    }
  }
}

// -----

// A tile that does not give the configured workgroup count is an error.
module {
  module @kernels {
    // expected-error @+1 {{nova-distribute-workgroups: tile gives 2 workgroups, the config says 5}}
    func.func @wrong(%wg: index, %a: memref<8xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 5, tile = [4], register_tile = []>} {
      %c = arith.constant 0.0 : f32
      linalg.fill ins(%c : f32) outs(%a : memref<8xf32>)
      return
    }
  }
}

// -----

// A loop nest split along its split loop (a scatter-add's columns): 100
// columns in tiles of 32 are 4 workgroups; each runs every update, its
// column loop narrowed to [wg * 32, min(wg * 32 + 32, 100)).
// CHECK-LABEL: func.func @scatter_columns
// CHECK-SAME: (%[[WG:[^:]*]]: index,
// CHECK: %[[T:.*]] = arith.constant 32 : index
// CHECK: %[[LO:.*]] = arith.muli %[[WG]], %[[T]]
// CHECK: %[[END:.*]] = arith.addi %[[LO]], %[[T]]
// CHECK: %[[HI:.*]] = arith.minui %[[END]], %c100
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c8
// CHECK: scf.for %{{.*}} = %[[LO]] to %[[HI]] step %c1
module {
  module @kernels {
    func.func @scatter_columns(%wg: index, %idx: memref<8xindex>, %u: memref<8x100xf32>, %out: memref<10x100xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 4, tile = [32], register_tile = []>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c100 = arith.constant 100 : index
      scf.for %n = %c0 to %c8 step %c1 {
        %r = memref.load %idx[%n] : memref<8xindex>
        scf.for %d = %c0 to %c100 step %c1 {
          %a = memref.load %out[%r, %d] : memref<10x100xf32>
          %b = memref.load %u[%n, %d] : memref<8x100xf32>
          %s = arith.addf %a, %b : f32
          memref.store %s, %out[%r, %d] : memref<10x100xf32>
        } {nova.split_loop}
      }
      return
    }
  }
}

// -----

// A split loop's tile must give the config's workgroups.
module {
  module @kernels {
    // expected-error @+1 {{nova-distribute-workgroups: tile gives 4 workgroups, the config says 3}}
    func.func @scatter_wrong(%wg: index, %out: memref<100xf32>)
        attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 3, tile = [32], register_tile = []>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c100 = arith.constant 100 : index
      %z = arith.constant 0.0 : f32
      scf.for %d = %c0 to %c100 step %c1 {
        memref.store %z, %out[%d] : memref<100xf32>
      } {nova.split_loop}
      return
    }
  }
}
