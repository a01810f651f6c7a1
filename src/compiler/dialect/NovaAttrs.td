//===- NovaAttrs.td - attributes of the nova dialect ------------*- tablegen -*-===//
//
// #nova.lowering_config: the decision a target's configurator makes for one
// kernel, written on the kernel so it can be printed, tested with FileCheck
// and cached with the code. The codegen passes read it and nothing else.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_ATTRS
#define NOVA_ATTRS

include "NovaDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Nova_LoweringConfigAttr : AttrDef<Nova_Dialect, "LoweringConfig"> {
  let mnemonic = "lowering_config";
  let summary = "how one kernel is lowered: its kind, workgroup grid and tiles";
  let description = [{
    - `kind`: `matmul` (register-blocked vector kernel, nova-vectorize-matmul),
      `amx_matmul` (the same matmul on AMX tiles, bf16 operands packed per
      slab, f32 accumulators; `register_tile = [32, 32]`, a 2 x 2 block of
      16 x 16 tiles; `cache_tile = [kc]`, a multiple of 32), `bf16_matmul`
      (the same packing, AVX512-BF16 dot products in vector registers;
      `register_tile = [8, 32]`, 8 rows x 2 vectors of accumulators),
      `attention` (nova.attention_kernel, nova-vectorize-attention: one
      workgroup per (batch, head), `tile = [1, 1]` over them), `rows`
      (nova.layer_norm_kernel, nova-vectorize-rows: `tile = [rows per
      workgroup]`, `register_tile = [rows interleaved, lanes]`),
      `loops` (a structured op split over workgroups, then loops) or
      `serial` (anything else: one workgroup runs it whole).
      On a GPU (target/cuda/GpuConfigurator.h): `mma_sync_matmul`,
      `wgmma_matmul` or `simt_matmul`, a thread block per tile, with
      `tile = [batch..., block rows, block columns]`, `cache_tile = [k slab,
      stages, split-K]` and `register_tile = [warp rows, warp columns]` (a
      warpgroup's for wgmma, a thread's for simt).
    - `workgroups`: how many workgroups the launch runs; on the CPU each is a
      task for one thread of the runtime's pool, on a GPU a thread block.
    - `tile`: the workgroup tile, one entry per distributed loop (for
      `loops`: every loop of the op, 0 = not split; for `matmul`: the result
      loops batch..., m, n). workgroups = product of ceil(extent / tile).
    - `cache_tile` (optional, printed only when not empty): for `matmul`,
      `[kc]`, the slab of the reduction dimension a register tile's operands
      are swept over while they stay in L1.
    - `register_tile`: for `matmul`, rows x columns of the result one
      register block holds (columns: a multiple of the vector width); for
      `attention`, query rows x head columns of one block of accumulators
      (the columns also give the score columns per block); empty otherwise.

    A kernel function carries it under its own name, `nova.lowering_config`
    (`LoweringConfigAttr::name`).

    Example: `#nova.lowering_config<matmul, workgroups = 8, tile = [512, 384], cache_tile = [96], register_tile = [6, 64]>`
  }];
  let parameters = (ins
    StringRefParameter<"kernel kind">:$kind,
    "int64_t":$workgroups,
    ArrayRefParameter<"int64_t", "workgroup tile per loop">:$tile,
    ArrayRefParameter<"int64_t", "cache tile">:$cache_tile,
    ArrayRefParameter<"int64_t", "register tile">:$register_tile
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// A CPU matmul kernel (vector FMAs, AMX tiles or bf16 dot products).
    bool isMatmul() const { return getKind() == "matmul" || isBf16Matmul(); }
    /// A CPU matmul kernel with bf16 products (Bf16Matmul.cpp).
    bool isBf16Matmul() const { return getKind() == "amx_matmul" || getKind() == "bf16_matmul"; }
    /// A GPU matmul kernel (GpuConfigurator.h).
    bool isGpuMatmul() const {
      return getKind() == "mma_sync_matmul" || getKind() == "wgmma_matmul" || getKind() == "simt_matmul";
    }
    bool isAmxMatmul() const { return getKind() == "amx_matmul"; }
    /// A GPU kernel of scalar threads: workgroups = blocks, tile = [threads
    /// per block] (GpuThreads.cpp).
    bool isGpuThreads() const { return getKind() == "gpu_threads"; }
    bool isLoops() const { return getKind() == "loops"; }
    bool isAttention() const { return getKind() == "attention"; }
    bool isRows() const { return getKind() == "rows"; }
  }];
}

#endif // NOVA_ATTRS
