//===- Bf16AttentionQkv.cpp - the nova-bf16-attention-qkv pass ---*- C++ -*-===//
//
// With bf16 matmuls on a CPU with AVX512-BF16, nova-vectorize-attention
// rounds q, k and v to bf16 as it packs them for its dot products, in the
// forward and in the backward, so a qkv that only attention reads can be
// made in bf16 where it is made (Bf16Copies.h copyAttentionQkv): bit for
// bit the same products, the rounding done once, and half the bytes kept
// from the forward through the backward (a GPT layer's [B, T, 3d]).
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Bf16Copies.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVABF16ATTENTIONQKV
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

struct NovaBf16AttentionQkv : mlir::nova::impl::NovaBf16AttentionQkvBase<NovaBf16AttentionQkv> {
  using NovaBf16AttentionQkvBase::NovaBf16AttentionQkvBase;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    auto precision = top->getAttrOfType<StringAttr>(nova::kMatmulPrecisionAttr);
    if (!dotBf16 || !precision || precision.getValue() != "bf16")
      return;
    auto roundsQkv = [&](nova::AttentionKernelOp op) { return nova::attentionDotsBf16(op.headDim(), vectorBits); };
    for (auto step : top.getOps<func::FuncOp>()) {
      nova::Bf16CopyMap copies;
      nova::copyAttentionQkv(step, roundsQkv, copies);
    }
  }
};

} // namespace
