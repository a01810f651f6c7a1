//===- RelaxReductions.cpp - the nova-relax-reductions pass ------*- C++ -*-===//
//
// For every linalg op with a reduction iterator, marks the floating-point
// arith ops of its body `reassoc` and `contract` (see Passes.td): the
// reduction loops it becomes may then be vectorized by LLVM. Elementwise ops
// are left strict: they vectorize without it.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVARELAXREDUCTIONS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

struct NovaRelaxReductions : mlir::nova::impl::NovaRelaxReductionsBase<NovaRelaxReductions> {
  void runOnOperation() override {
    auto relaxed = arith::FastMathFlags::reassoc | arith::FastMathFlags::contract;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.getNumReductionLoops() == 0)
        return;
      op->walk([&](arith::ArithFastMathInterface fm) {
        fm->setAttr(fm.getFastMathAttrName(),
                    arith::FastMathFlagsAttr::get(op->getContext(), fm.getFastMathFlagsAttr().getValue() | relaxed));
      });
    });
  }
};

} // namespace
