//===- Context.h - the compiler's MLIR context -------------------*- C++ -*-===//
//
// One MLIRContext per process, with every dialect, bufferization model and
// LLVM translation the CPU pipeline needs. Tracing and compiling hold
// compilerMutex(): MLIR IR construction is not thread-safe per module, and one
// lock keeps the first version simple (compiles are rare; hits never lock it).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_CONTEXT_H
#define NOVA_COMPILER_CONTEXT_H

#include <mutex>

namespace mlir {
class DialectRegistry;
class MLIRContext;
} // namespace mlir

namespace mlir::nova {

/// Every dialect and external model Nova's pipeline uses (also for nova-opt).
void registerNovaCompilerDialects(DialectRegistry &registry);

/// The process's context. Only the dialects tracing builds are loaded.
MLIRContext &compilerContext();
/// Loads every registered dialect: before any pass runs on a traced module.
void loadCompilerDialects(MLIRContext &ctx);
std::recursive_mutex &compilerMutex();

} // namespace mlir::nova

#endif // NOVA_COMPILER_CONTEXT_H
