//===- DestinationPassing.cpp - memref in/out function boundary --*- C++ -*-===//
//
// Rewrites each public function from `(tensor...) -> (tensor...)` to
// `(memref inputs..., memref outputs...) -> ()`. Inputs are marked `restrict`
// (the runtime never passes an output buffer as an input), so one-shot
// bufferization may read them in place; results are materialized into the
// caller's buffers, so no result is allocated inside compiled code.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVADESTINATIONPASSING
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

MemRefType toMemRef(Type t) {
  auto tensor = cast<RankedTensorType>(t);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

LogicalResult convertFunction(func::FuncOp func) {
  if (func.isExternal() || !func.isPublic())
    return success();
  FunctionType type = func.getFunctionType();
  auto isTensor = [](Type t) { return isa<RankedTensorType>(t); };
  if (!llvm::all_of(type.getInputs(), isTensor) ||
      !llvm::all_of(type.getResults(), isTensor))
    return func.emitError("nova-destination-passing: every argument and "
                          "result must be a ranked tensor");

  Block &entry = func.front();
  OpBuilder b(func.getContext());
  b.setInsertionPointToStart(&entry);
  SmallVector<Type> newInputs;
  for (BlockArgument arg : entry.getArguments()) {
    Type tensorType = arg.getType();
    arg.setType(toMemRef(tensorType));
    auto toTensor = b.create<bufferization::ToTensorOp>(
        arg.getLoc(), tensorType, arg, /*restrict=*/true, /*writable=*/false);
    arg.replaceAllUsesExcept(toTensor.getResult(), toTensor);
    newInputs.push_back(arg.getType());
  }

  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  b.setInsertionPoint(ret);
  for (Value result : ret.getOperands()) {
    BlockArgument out = entry.addArgument(toMemRef(result.getType()), ret.getLoc());
    newInputs.push_back(out.getType());
    b.create<bufferization::MaterializeInDestinationOp>(
        ret.getLoc(), Type(), result, out, /*restrict=*/true, /*writable=*/true);
  }
  b.create<func::ReturnOp>(ret.getLoc());
  ret.erase();
  func.setFunctionType(b.getFunctionType(newInputs, {}));
  func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), b.getUnitAttr());
  return success();
}

struct NovaDestinationPassing
    : mlir::nova::impl::NovaDestinationPassingBase<NovaDestinationPassing> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(convertFunction(func)))
        return signalPassFailure();
  }
};

} // namespace
