// A kernel asking for more dynamic shared memory than its target lets a
// block opt into is refused by name when outlined (it would fail at
// launch, on the device): sm_86 allows 101376 bytes (99 KiB), sm_90a
// 232448 (227 KiB).
// RUN: not nova-opt %s -nova-gpu-outline-kernels=target=sm_86 2>&1 | FileCheck %s --check-prefix=SM86
// RUN: nova-opt %s -nova-gpu-outline-kernels=target=sm_90a | FileCheck %s --check-prefix=SM90

// SM86: error: nova-gpu-outline-kernels: kernel big needs 200000 bytes of shared memory a block; sm_86 allows at most 101376
// SM90: gpu.func @nova_big(
func.func @big(%wg: index, %a: memref<4xf32>) attributes {nova.gpu_block_threads = 32 : i64, nova.gpu_shared_bytes = 200000 : i64,
    nova.lowering_config = #nova.lowering_config<gpu_threads, workgroups = 1, tile = [32], register_tile = []>} {
  return
}
