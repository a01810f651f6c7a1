//===- DedupKernels.cpp - the nova-dedup-kernels pass ------------*- C++ -*-===//
//
// A kernel's identity is its text: the function printed in generic form,
// without locations, under a placeholder name. Equal text means equal ops,
// attributes, shapes and dtypes, hence the same computation on buffers of
// the same types. Every launch of a later duplicate is redirected to the
// first kernel with that text, and the duplicate is erased. Kernels keep
// their order, so the result is deterministic. The mark of a recomputed op
// (`nova.rematerialized`) is dropped from kernels first: it changes nothing
// they compute, and kept it made a GPT's recomputed attention forward a
// second kernel of its own (a second 150 ms of the CPU step's codegen).
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVADEDUPKERNELS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

std::string kernelText(func::FuncOp kernel) {
  StringAttr name = kernel.getSymNameAttr();
  kernel.setSymName("kernel");
  std::string text;
  llvm::raw_string_ostream os(text);
  // Local scope: value numbers start afresh in each kernel, not from the module.
  kernel->print(os, OpPrintingFlags().printGenericOpForm().useLocalScope().elideLargeElementsAttrs(0));
  kernel.setSymName(name);
  return text;
}

struct NovaDedupKernels : mlir::nova::impl::NovaDedupKernelsBase<NovaDedupKernels> {
  void runOnOperation() override {
    ModuleOp top = getOperation();
    for (ModuleOp kernels : top.getOps<ModuleOp>()) {
      llvm::StringMap<StringAttr> first;
      llvm::DenseMap<StringAttr, StringAttr> replacement;
      for (auto kernel : llvm::make_early_inc_range(kernels.getOps<func::FuncOp>())) {
        kernel.walk([](Operation *op) { op->removeAttr(nova::kRematerializedAttr); });
        auto [it, inserted] = first.try_emplace(kernelText(kernel), kernel.getSymNameAttr());
        if (inserted)
          continue;
        replacement[kernel.getSymNameAttr()] = it->second;
        kernel.erase();
      }
      if (replacement.empty())
        continue;
      top.walk([&](nova::LaunchOp launch) {
        SymbolRefAttr ref = launch.getKernelAttr();
        if (ref.getRootReference() != kernels.getSymNameAttr())
          return;
        auto it = replacement.find(ref.getLeafReference());
        if (it == replacement.end())
          return;
        launch.setKernelAttr(SymbolRefAttr::get(ref.getRootReference(),
                                                {FlatSymbolRefAttr::get(it->second)}));
      });
    }
  }
};

} // namespace
