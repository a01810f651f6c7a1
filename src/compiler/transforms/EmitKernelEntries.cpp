//===- EmitKernelEntries.cpp - the nova-emit-kernel-entries pass -*- C++ -*-===//
//
// The runtime calls every kernel the same way, whatever its parameters:
//
//   void nova_<kernel>(int64_t workgroup, void* const* args)
//
// (executable_desc.hpp). After the bare-pointer lowering each kernel is
// `llvm.func @kN(i64, !llvm.ptr, ...)`; this pass adds the entry that loads
// args[0..n) and calls it, and makes the kernel itself internal so LLVM
// inlines it and only entries are exported.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAEMITKERNELENTRIES
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

constexpr StringLiteral kEntryPrefix = "nova_";

struct NovaEmitKernelEntries
    : mlir::nova::impl::NovaEmitKernelEntriesBase<NovaEmitKernelEntries> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    SmallVector<LLVM::LLVMFuncOp> kernels;
    for (auto f : module.getOps<LLVM::LLVMFuncOp>())
      if (!f.isExternal() && !f.getName().starts_with(kEntryPrefix))
        kernels.push_back(f);
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    for (LLVM::LLVMFuncOp kernel : kernels) {
      LLVM::LLVMFunctionType type = kernel.getFunctionType();
      ArrayRef<Type> params = type.getParams();
      if (params.empty() || params.front() != i64 ||
          !llvm::all_of(params.drop_front(), [&](Type t) { return t == ptr; }) ||
          !isa<LLVM::LLVMVoidType>(type.getReturnType())) {
        kernel.emitError("nova-emit-kernel-entries: a kernel must be (i64, ptr...) -> void "
                         "after the bare-pointer lowering, not ")
            << type;
        return signalPassFailure();
      }
      Location loc = kernel.getLoc();
      auto entry = b.create<LLVM::LLVMFuncOp>(
          loc, (kEntryPrefix + kernel.getName()).str(),
          LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {i64, ptr}));
      Block *body = entry.addEntryBlock(b);
      OpBuilder eb = OpBuilder::atBlockEnd(body);
      SmallVector<Value> args{body->getArgument(0)};
      for (size_t i = 1; i < params.size(); ++i) {
        Value slot = eb.create<LLVM::GEPOp>(loc, ptr, ptr, body->getArgument(1),
                                            ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i - 1)});
        args.push_back(eb.create<LLVM::LoadOp>(loc, ptr, slot));
      }
      eb.create<LLVM::CallOp>(loc, kernel, args);
      eb.create<LLVM::ReturnOp>(loc, ValueRange{});
      kernel.setLinkage(LLVM::Linkage::Internal);
    }
  }
};

} // namespace
