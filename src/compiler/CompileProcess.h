//===- CompileProcess.h - compiling a traced step in a child process -*- C++ -*-===//
//
// The compiler's memory (MLIR and LLVM code pages, their heaps) is not the
// training step's. By default (NOVA_COMPILE=process) a step that misses both
// caches is compiled by the `nova-compile` tool in a child process: the
// traced module goes to it as MLIR bytecode, the signature and target as a
// request file, and the executable description comes back as a file. The
// training process never pages in the code generator, its resident size is
// the step's, and the compiler's own peak is measured exactly (the child's
// maximum resident size since its exec, or its ptxas's, which it reports
// itself: wait4's figure would include the parent's). A compiler crash
// becomes a CompileError, not the end of the training run.
// NOVA_COMPILE=inline compiles in this process.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_COMPILEPROCESS_H
#define NOVA_COMPILER_COMPILEPROCESS_H

#include "compiler/CompileDriver.h"

#include <optional>
#include <string>

namespace mlir::nova {

/// The `nova-compile` tool, when NOVA_COMPILE is not "inline": the path in
/// NOVA_COMPILE_TOOL, or the tool beside this libnova.so (build tree) or in
/// ../libexec (installed); nullopt (and a warning, once) if there is none.
/// Throws ::nova::Error for a NOVA_COMPILE it does not know.
std::optional<std::string> compilerProcessTool();

/// compileToDescription() in a child process running `tool`; the result
/// carries `key`, and `peakBytes` gets the child's peak resident size (0 if
/// it could not be read). Throws ::nova::CompileError with the child's
/// message, or naming the signal or exit status it died of.
::nova::ExecutableDesc compileInChildProcess(const std::string &tool, ModuleOp traced,
                                             const StepSignature &signature,
                                             const ::nova::TargetDesc &target,
                                             const std::array<uint64_t, 2> &key, uint64_t &peakBytes);

/// nova-compile's main: REQUEST MODULE STEP OUT. Exit 0 with OUT written,
/// or 2 (a CompileError) / 3 (another error) with OUT.error written.
int compilerProcessMain(int argc, char **argv);

} // namespace mlir::nova

#endif // NOVA_COMPILER_COMPILEPROCESS_H
