// Programmatic dependent launch: on sm_90 every kernel's first op waits
// for the grids before it (griddepcontrol.wait, inline asm: MLIR 19 has no
// op for it) and its second lets the kernel after it launch, so the
// runtime may launch each as a dependent of the one before; the kernel
// that folds a fill's constant (k1_init0) and the one that reads the
// buffer (k1) alike. On sm_80 (no griddepcontrol) neither. The input is
// gpu-threads-fills-clone.mlir's (after -nova-lower-to-kernels).
// RUN: nova-opt %s -nova-gpu-threads="target=sm_90a" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_90a}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=SM90
// RUN: nova-opt %s -nova-gpu-threads="target=sm_80" -verify-each \
// RUN:   | nova-opt -pass-pipeline='builtin.module(builtin.module(nova-gpu-map-threads,canonicalize,cse,nova-gpu-outline-kernels{target=sm_80}))' -verify-each \
// RUN:   | FileCheck %s --check-prefix=SM80

// SM90: gpu.func @nova_k1_init0(
// SM90-NEXT: llvm.inline_asm has_side_effects "griddepcontrol.wait;", ""  : () -> ()
// SM90-NEXT: llvm.inline_asm has_side_effects "griddepcontrol.launch_dependents;", ""  : () -> ()
// SM90: gpu.func @nova_k1(
// SM90-NEXT: llvm.inline_asm has_side_effects "griddepcontrol.wait;", ""  : () -> ()
// SM90-NEXT: llvm.inline_asm has_side_effects "griddepcontrol.launch_dependents;", ""  : () -> ()
// SM80: gpu.func @nova_k1_init0(
// SM80-NOT: griddepcontrol
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @twice(%arg0: memref<64x256xf32>, %arg1: memref<256xf32>) {
    nova.launch @kernels::@k0(%arg1) : memref<256xf32>
    nova.launch @kernels::@k1(%arg0, %arg1) : memref<64x256xf32>, memref<256xf32>
    nova.launch @kernels::@k1(%arg0, %arg1) : memref<64x256xf32>, memref<256xf32>
    return
  }
  module @kernels {
    func.func @k0(%arg0: index, %arg1: memref<256xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0], register_tile = []>} {
      %cst = arith.constant 0.000000e+00 : f32
      linalg.fill ins(%cst : f32) outs(%arg1 : memref<256xf32>)
      return
    }
    func.func @k1(%arg0: index, %arg1: memref<64x256xf32>, %arg2: memref<256xf32>) attributes {nova.lowering_config = #nova.lowering_config<loops, workgroups = 1, tile = [0, 0], register_tile = []>} {
      linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["reduction", "parallel"]} ins(%arg1 : memref<64x256xf32>) outs(%arg2 : memref<256xf32>) {
      ^bb0(%in: f32, %out: f32):
        %0 = arith.addf %in, %out : f32
        linalg.yield %0 : f32
      }
      return
    }
  }
}
