//===- CpuCodegen.cpp - lowered kernels → one ELF shared object --*- C++ -*-===//
//
// Each kernel entry (nova_kN) with the functions and declarations it
// references is cloned into a module of its own and translated to LLVM IR in
// a context of its own, so the expensive part, LLVM's -O3 pipeline and
// instruction selection, runs for all kernels in parallel on the host's
// cores (the compile of a step grows with its distinct kernels, not with its
// layers). The target machine is the TargetDesc's ISA level (x86-64-v4, ...)
// plus its extra features, position-independent; kernels get
// "prefer-vector-width"/"min-legal-vector-width" of the configured width, so
// the register kernels' 512-bit vectors are not split on CPUs LLVM tunes for
// 256. The objects are linked by the system linker (`ld -shared`, or
// $NOVA_LD) entirely in memory files: compiling writes nothing to disk.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cpu/CpuTarget.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"

#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

extern char **environ;

using namespace mlir;

namespace {

constexpr const char *kTriple = "x86_64-unknown-linux-gnu";

void initializeLLVMOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

/// LLVM's name for a feature beyond the ISA level (/proc/cpuinfo spelling in).
std::string llvmFeature(const std::string &f) {
  static const std::pair<const char *, const char *> names[] = {
      {"avx512_bf16", "avx512bf16"}, {"avx512_fp16", "avx512fp16"},
      {"avx512_vnni", "avx512vnni"}, {"avx_vnni", "avxvnni"},
      {"amx_tile", "amx-tile"},      {"amx_bf16", "amx-bf16"},
      {"amx_int8", "amx-int8"}};
  for (auto [from, to] : names)
    if (f == from)
      return to;
  return "";
}

std::string featureString(const ::nova::TargetDesc &desc) {
  std::string s;
  for (const auto &f : desc.features) {
    std::string name = llvmFeature(f);
    if (!name.empty())
      s += (s.empty() ? "+" : ",+") + name;
  }
  return s;
}

std::unique_ptr<llvm::TargetMachine> makeTargetMachine(const ::nova::TargetDesc &desc,
                                                       std::string &error) {
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(kTriple, error);
  if (!target)
    return nullptr;
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      kTriple, desc.cpu, featureString(desc), options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Default));
}

/// A module holding `entry` and everything it references, transitively.
OwningOpRef<ModuleOp> extractKernel(LLVM::LLVMFuncOp entry, ModuleOp kernels) {
  OpBuilder b(kernels.getContext());
  OwningOpRef<ModuleOp> module = ModuleOp::create(kernels.getLoc());
  b.setInsertionPointToEnd(module->getBody());
  SymbolTable table(kernels);
  llvm::SetVector<Operation *> needed;
  SmallVector<Operation *> work{entry};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!needed.insert(op))
      continue;
    op->walk([&](Operation *inner) {
      for (NamedAttribute attr : inner->getAttrs())
        attr.getValue().walk([&](FlatSymbolRefAttr ref) {
          if (Operation *def = table.lookup(ref.getAttr()))
            work.push_back(def);
        });
    });
  }
  // Keep the module's order: declarations and globals before their users
  // are not required by LLVM, but it keeps the IR readable when dumped.
  for (Operation &op : kernels.getBody()->getOperations())
    if (needed.contains(&op))
      b.clone(op);
  return module;
}

/// An anonymous in-memory file that child processes inherit.
struct MemFile {
  int fd = -1;
  explicit MemFile(const char *name) : fd(memfd_create(name, 0)) {}
  ~MemFile() {
    if (fd >= 0)
      ::close(fd);
  }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd); }
  bool write(const char *data, size_t n) const {
    while (n > 0) {
      ssize_t w = ::write(fd, data, n);
      if (w <= 0)
        return false;
      data += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  std::vector<uint8_t> readAll() const {
    off_t size = ::lseek(fd, 0, SEEK_END);
    std::vector<uint8_t> bytes(size > 0 ? static_cast<size_t>(size) : 0);
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t r = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      if (r <= 0)
        break;
      done += static_cast<size_t>(r);
    }
    bytes.resize(done);
    return bytes;
  }
};

/// `ld -shared` over the objects, in memory files; the shared object's bytes.
FailureOr<std::vector<uint8_t>> link(const std::vector<llvm::SmallVector<char, 0>> &objects,
                                     std::string &error) {
  std::vector<std::unique_ptr<MemFile>> inputs;
  for (const auto &obj : objects) {
    inputs.push_back(std::make_unique<MemFile>("nova-kernel.o"));
    if (inputs.back()->fd < 0 || !inputs.back()->write(obj.data(), obj.size())) {
      error = "writing object code to a memory file failed";
      return failure();
    }
  }
  MemFile output("nova-kernels.so"), messages("nova-ld-messages");
  if (output.fd < 0 || messages.fd < 0) {
    error = "memfd_create failed";
    return failure();
  }
  const char *linker = std::getenv("NOVA_LD");
  std::vector<std::string> args = {linker && *linker ? linker : "ld", "-shared", "-z",
                                   "noexecstack", "--hash-style=gnu", "-o", output.path()};
  for (const auto &in : inputs)
    args.push_back(in->path());
  std::vector<char *> argv;
  for (auto &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, messages.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, messages.fd, STDERR_FILENO);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    error = "cannot run the linker '" + args[0] + "' (" + std::strerror(rc) +
            "); install binutils or set NOVA_LD";
    return failure();
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::vector<uint8_t> text = messages.readAll();
    error = "the linker '" + args[0] + "' failed:\n" + std::string(text.begin(), text.end());
    return failure();
  }
  return output.readAll();
}

} // namespace

FailureOr<mlir::nova::Artifact>
mlir::nova::emitCpuSharedObject(ModuleOp kernels, const ::nova::TargetDesc &desc,
                                CompileReport &report, std::string &error) {
  initializeLLVMOnce();
  SmallVector<LLVM::LLVMFuncOp> entries;
  for (auto f : kernels.getOps<LLVM::LLVMFuncOp>())
    if (!f.isExternal() && f.getName().starts_with("nova_"))
      entries.push_back(f);

  Stopwatch clock;
  // Translation touches the MLIR context: one kernel after another.
  std::vector<std::unique_ptr<llvm::LLVMContext>> contexts;
  std::vector<std::unique_ptr<llvm::Module>> modules;
  for (LLVM::LLVMFuncOp entry : entries) {
    OwningOpRef<ModuleOp> one = extractKernel(entry, kernels);
    contexts.push_back(std::make_unique<llvm::LLVMContext>());
    std::unique_ptr<llvm::Module> m =
        translateModuleToLLVMIR(*one, *contexts.back(), entry.getName());
    if (!m) {
      error = "translating kernel " + entry.getName().str() + " to LLVM IR failed";
      return failure();
    }
    std::string width = std::to_string(desc.vector_bits);
    for (llvm::Function &f : *m) {
      if (f.isDeclaration())
        continue;
      f.addFnAttr("prefer-vector-width", width);
      f.addFnAttr("min-legal-vector-width", width);
      // A kernel's buffers never overlap where one is written: parameters are
      // distinct roots (step arguments, or arena buffers live at the same
      // time), and the runtime refuses a donated input that shares memory
      // with another. Saying so spares LLVM its runtime alias checks and
      // scalar fallback loops.
      if (f.hasInternalLinkage())
        for (llvm::Argument &arg : f.args())
          if (arg.getType()->isPointerTy())
            arg.addAttr(llvm::Attribute::NoAlias);
    }
    modules.push_back(std::move(m));
  }

  report.add("translate to LLVM IR", clock.lap());
  std::vector<double> seconds(modules.size());
  // -O2 and instruction selection, one kernel per task, on every core.
  std::vector<llvm::SmallVector<char, 0>> objects(modules.size());
  std::vector<std::string> errors(modules.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    std::string why;
    std::unique_ptr<llvm::TargetMachine> tm = makeTargetMachine(desc, why);
    // -O2, not -O3: measured on the GPT step, -O3 took 45% longer to
    // compile (its unroller fully unrolls the static loop nests of copies and
    // transposes) and the step ran no faster.
    auto optimize = makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0, tm.get());
    for (size_t i = next++; i < modules.size(); i = next++) {
      if (!tm) {
        errors[i] = "no LLVM target for " + std::string(kTriple) + ": " + why;
        continue;
      }
      llvm::Module &m = *modules[i];
      m.setTargetTriple(kTriple);
      m.setDataLayout(tm->createDataLayout());
      Stopwatch kernelClock;
      if (llvm::Error e = optimize(&m)) {
        errors[i] = "optimizing " + m.getModuleIdentifier() + ": " + llvm::toString(std::move(e));
        continue;
      }
      llvm::raw_svector_ostream os(objects[i]);
      llvm::legacy::PassManager codegen;
      if (tm->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
        errors[i] = "the target machine cannot emit object files";
        continue;
      }
      codegen.run(m);
      seconds[i] = kernelClock.lap();
    }
  };
  size_t threads = std::min<size_t>(modules.size(),
                                    std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back(worker);
  worker();
  for (auto &t : pool)
    t.join();
  for (const auto &e : errors)
    if (!e.empty()) {
      error = e;
      return failure();
    }
  modules.clear();
  contexts.clear();

  report.add("LLVM -O2 + isel", clock.lap());
  report.codegenThreads = threads;
  std::vector<size_t> order(seconds.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return seconds[a] > seconds[b]; });
  for (size_t i = 0; i < std::min<size_t>(3, order.size()); ++i)
    report.slowestKernels.emplace_back(entries[order[i]].getName().str(), seconds[order[i]]);
  Artifact artifact;
  artifact.format = "elf-shared-object";
  if (objects.empty())
    return artifact;
  FailureOr<std::vector<uint8_t>> so = link(objects, error);
  if (failed(so))
    return failure();
  artifact.bytes = std::move(*so);
  report.add("link (ld -shared)", clock.lap());
  report.objectBytes = artifact.bytes.size();
  return artifact;
}
