//===- CpuJit.cpp - the CPU executable ---------------------------*- C++ -*-===//
//
// MLIR's ExecutionEngine (LLVM ORC) compiles the module at -O3 for the host
// CPU (its features, AVX-512 included, are detected by ORC). The step is
// called through the packed wrapper of its C interface, `_mlir_ciface_<f>`,
// whose arguments are pointers to memref descriptors:
//   { T* allocated, T* aligned, i64 offset, i64 sizes[rank], i64 strides[rank] }
// Outputs that alias an input (in-place updates) have no argument of their
// own. Every descriptor field is 8 bytes, so one i64 array of 3 + 2*rank words per
// tensor is the descriptor, for any rank.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cpu/CpuJit.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>

using namespace mlir;

namespace {

void initializeLLVMOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

void appendDescriptor(SmallVectorImpl<int64_t> &words, const ::nova::Tensor &t) {
  auto ptr = reinterpret_cast<int64_t>(t.raw_data());
  words.push_back(ptr); // allocated
  words.push_back(ptr); // aligned
  words.push_back(0);   // offset
  for (int64_t d : t.shape())
    words.push_back(d);
  for (int64_t s : t.strides())
    words.push_back(s);
}

class CpuJitExecutable final : public ::nova::Executable {
public:
  CpuJitExecutable(std::unique_ptr<ExecutionEngine> engine,
                   void (*entry)(void **), std::vector<::nova::TensorSpec> in,
                   std::vector<::nova::TensorSpec> out, std::vector<int> aliases)
      : Executable(std::move(in), std::move(out), std::move(aliases)), engine(std::move(engine)),
        entry(entry) {}

  std::string kind() const override { return "cpu-jit"; }

  void run(std::span<const ::nova::Tensor> inputs,
           std::span<::nova::Tensor> outputs) const override {
    // On the stack for typical steps: this runs on every cache hit.
    SmallVector<int64_t, 128> words;
    SmallVector<std::size_t, 32> starts;
    for (const auto &t : inputs) {
      starts.push_back(words.size());
      appendDescriptor(words, t);
    }
    // Aliased outputs are written through their input's descriptor.
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (output_aliases()[i] >= 0)
        continue;
      starts.push_back(words.size());
      appendDescriptor(words, outputs[i]);
    }
    std::size_t count = starts.size();
    // Packed calling convention: args[i] points at argument i, which is
    // itself a pointer to a descriptor.
    SmallVector<void *, 32> descriptors(count), args(count);
    for (std::size_t i = 0; i < count; ++i) {
      descriptors[i] = words.data() + starts[i];
      args[i] = &descriptors[i];
    }
    entry(args.data());
  }

private:
  std::unique_ptr<ExecutionEngine> engine;
  void (*entry)(void **);
};

} // namespace

std::shared_ptr<::nova::Executable>
mlir::nova::compileForCpu(ModuleOp module, const std::string &funcName,
                          std::vector<::nova::TensorSpec> inputs,
                          std::vector<::nova::TensorSpec> outputs,
                          std::vector<int> aliases) {
  initializeLLVMOnce();
  ExecutionEngineOptions options;
  options.transformer = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0,
                                                  /*targetMachine=*/nullptr);
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  // memrefCopy and friends. (The async runtime is linked into libnova.)
  static const SmallVector<StringRef, 1> libs = {NOVA_MLIR_C_RUNNER_UTILS};
  options.sharedLibPaths = libs;
  auto engine = ExecutionEngine::create(module, options);
  if (!engine)
    throw ::nova::CompileError("nova: JIT compilation failed: " +
                               llvm::toString(engine.takeError()));
  auto entry = (*engine)->lookupPacked("_mlir_ciface_" + funcName);
  if (!entry)
    throw ::nova::CompileError("nova: compiled step has no entry point: " +
                               llvm::toString(entry.takeError()));
  return std::make_shared<CpuJitExecutable>(std::move(*engine), *entry,
                                            std::move(inputs), std::move(outputs),
                                            std::move(aliases));
}
