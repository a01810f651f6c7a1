//===- DestinationPassing.cpp - memref in/out function boundary --*- C++ -*-===//
//
// Rewrites each public function from `(tensor...) -> (tensor...)` to
// `(memref inputs..., memref outputs...) -> ()`. Inputs are marked `restrict`
// (the runtime never passes an output buffer as an input), so one-shot
// bufferization may read them in place; results are materialized into the
// caller's buffers, so no result is allocated inside compiled code.
// `nova.result_aliases` (one entry per result: an argument index or -1)
// marks results that overwrite an argument in place (parameters, optimizer
// state); such results get no output argument of their own, and the op that
// computes one into a fresh tensor computes it into the argument instead.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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

LogicalResult convertFunction(func::FuncOp func, bool inPlace) {
  if (func.isExternal() || !func.isPublic())
    return success();
  FunctionType type = func.getFunctionType();
  auto isTensor = [](Type t) { return isa<RankedTensorType>(t); };
  if (!llvm::all_of(type.getInputs(), isTensor) ||
      !llvm::all_of(type.getResults(), isTensor))
    return func.emitError("nova-destination-passing: every argument and "
                          "result must be a ranked tensor");

  Block &entry = func.front();
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  SmallVector<int64_t> aliases(ret.getNumOperands(), -1);
  if (auto attr = func->getAttrOfType<DenseI64ArrayAttr>("nova.result_aliases")) {
    if (attr.size() != static_cast<int64_t>(aliases.size()))
      return func.emitError("nova.result_aliases needs one entry per result");
    aliases.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
    for (auto [i, a] : llvm::enumerate(aliases))
      if (a >= 0 && (a >= static_cast<int64_t>(entry.getNumArguments()) ||
                     entry.getArgument(a).getType() != ret.getOperand(i).getType()))
        return func.emitError("result ") << i << " cannot alias argument " << a;
    func->removeAttr("nova.result_aliases");
  }
  llvm::SmallDenseSet<int64_t> donated(aliases.begin(), aliases.end());

  OpBuilder b(func.getContext());
  b.setInsertionPointToStart(&entry);
  SmallVector<Type> newInputs;
  for (BlockArgument arg : entry.getArguments()) {
    Type tensorType = arg.getType();
    arg.setType(toMemRef(tensorType));
    // A donated argument is overwritten in place by its result; one-shot
    // bufferization orders every read of the old value before that write.
    bool writable = donated.contains(arg.getArgNumber());
    auto toTensor = b.create<bufferization::ToTensorOp>(
        arg.getLoc(), tensorType, arg, /*restrict=*/true, writable);
    arg.replaceAllUsesExcept(toTensor.getResult(), toTensor);
    newInputs.push_back(arg.getType());
  }

  // A result that overwrites an argument, computed by a structured op into
  // a fresh tensor, is computed into the argument itself: the update of a
  // parameter or optimizer state writes in place, with no copy after it.
  // (One-shot bufferization checks that every read of the old value comes
  // first; where one does not, it copies, as before.)
  for (auto [i, result] : llvm::enumerate(ret.getOperands())) {
    if (aliases[i] < 0 || !inPlace)
      continue;
    auto producer = result.getDefiningOp<DestinationStyleOpInterface>();
    if (!producer || !isa<linalg::LinalgOp>(producer.getOperation()))
      continue;
    OpOperand *init = producer.getTiedOpOperand(cast<OpResult>(result));
    auto linalgOp = cast<linalg::LinalgOp>(producer.getOperation());
    if (!init || !init->get().getDefiningOp<tensor::EmptyOp>() || linalgOp.payloadUsesValueFromOperand(init))
      continue;
    Value arg = entry.getArgument(aliases[i]);
    for (Operation *user : arg.getUsers())
      if (auto toTensor = dyn_cast<bufferization::ToTensorOp>(user))
        init->set(toTensor.getResult());
  }

  b.setInsertionPoint(ret);
  for (auto [i, result] : llvm::enumerate(ret.getOperands())) {
    Value out;
    if (aliases[i] >= 0) {
      out = entry.getArgument(aliases[i]);
    } else {
      out = entry.addArgument(toMemRef(result.getType()), ret.getLoc());
      newInputs.push_back(out.getType());
    }
    // A donated argument already has a `to_tensor restrict`, so its
    // materialization may not claim `restrict` too: where the result was
    // not computed into the argument above, it bufferizes to a copy into
    // the argument after every read of the old value.
    b.create<bufferization::MaterializeInDestinationOp>(
        ret.getLoc(), Type(), result, out, /*restrict=*/aliases[i] < 0, /*writable=*/true);
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
    // NOVA_IN_PLACE=0 (the module's nova.in_place): results that overwrite
    // an argument are computed into fresh buffers and copied.
    auto inPlace = getOperation()->getAttrOfType<BoolAttr>(nova::kInPlaceAttr);
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(convertFunction(func, !inPlace || inPlace.getValue())))
        return signalPassFailure();
  }
};

} // namespace
