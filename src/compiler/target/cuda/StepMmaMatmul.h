//===- StepMmaMatmul.h - a step's matmul kernel as a tensor-core kernel -*- C++ -*-===//
//
// The bridge between a step's matmul kernel (a linalg matmul generic over
// views of the kernel's buffers, nova-lower-to-linalg's form) and the
// tensor-core kernels written lane by lane: mma.sync (MmaMatmulKernel.cpp)
// or, where the configurator picks it (sm_90a, two different buffers),
// TMA + wgmma (WgmmaMatmulKernel.cpp), whose lhs and
// rhs arguments become the TMA tensor maps the runtime encodes over them:
//   - planStepMmaMatmul: whether the kernel can be it, and with which
//     problem and configuration (the GPU configurator's);
//     else why not, in words for NOVA_EXPLAIN;
//   - buildStepMmaMatmul: the gpu.func `nova_<kernel>` taking the kernel's
//     buffers in the launch's order, each reinterpreted as the operand the
//     generated kernel expects (a contiguous reshape or the transposed
//     storage the layout check allowed), its blocks numbered along x.
// Operands: f16 and bf16 as they are; f32 as tf32 when the step allows a
// lower matmul precision (nova.matmul_precision = bf16: tf32 keeps 10
// mantissa bits, bf16 7, and reads the f32 operands in place), else as
// 3xtf32 where the configurator finds that faster than the simt kernel's
// f32 FMAs (GpuConfigurator.h). The result
// is f32, or with a fused elementwise epilogue (kGpuEpilogueAttr) that
// op's result, computed in registers. A fused lhs prologue, other types and shapes the kernel refuses
// (contiguous extents not whole 16-byte chunks) keep the scalar threads.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_STEPMMAMATMUL_H
#define NOVA_COMPILER_TARGET_CUDA_STEPMMAMATMUL_H

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/target/cuda/GpuMatmulEpilogue.h"
#include "compiler/target/cuda/TmaMap.h"
#include "nova/executable_desc.hpp"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>
#include <string>

namespace mlir::nova {

struct StepMmaPlan {
  GpuMatmulProblem problem;
  GpuMatmulConfig config;
  bool batched = false;
  /// wgmma: the tensor maps (WgmmaMatmulKernel's: `arg` 0 the lhs, 1 the
  /// rhs), and the kernel arguments (after the workgroup number) they
  /// replace: the lhs's and the rhs's buffers.
  std::vector<::nova::TensorMapDesc> maps;
  /// outArgument: kNoArgument where the kernel has no product buffer (a
  /// fused epilogue's, which never stores the product).
  static constexpr unsigned kNoArgument = ~0u;
  unsigned lhsArgument = 0, rhsArgument = 0, outArgument = 0;
};

/// The plan's tensor maps as the kernel's kGpuTensorMapsAttr, and back as
/// the launch plan records them (failure: a malformed map, or one of elements other than f32, bf16 or f16). The
/// attribute's layout is these two functions' alone.
ArrayAttr tensorMapsAttr(const StepMmaPlan &plan, MLIRContext *ctx);
FailureOr<std::vector<::nova::TensorMapDesc>> tensorMapsOf(Operation *kernel);

/// The plan for kernel `kernel` (one compute op, a tagged matmul), or
/// failure with `why`. `lowPrecision`: the step allows bf16 matmuls.
/// `tryBuilding`: the generator tried on a scratch module (configuring);
/// the codegen that builds it for real re-plans without. Split-K (the
/// configurator's choice) is allowed when configuring a
/// product with no batch whose result is its whole m x n buffer, and kept
/// at codegen where the kernel carries kGpuSplitKAttr (GpuThreads.cpp adds
/// the partial products' workspace and sum kernel in between).
FailureOr<StepMmaPlan> planStepMmaMatmul(func::FuncOp kernel, const ::nova::TargetDesc &target,
                                         bool lowPrecision, std::string &why, bool tryBuilding = true);

/// A kernel's matmul followed by `epilogue`, an elementwise op of its
/// product a GPU matmul kernel can run on its results in registers
/// (GpuMatmulEpilogue.h): a register epilogue (MatmulKernel.h) of an m x n
/// product (no batch) whose other inputs are each a column's value, the
/// element's own or one value, every one the whole of a kernel buffer, and
/// whose result is the whole of an m x n f32 buffer (or a narrower float's) that neither operand
/// of the matmul is. Gives the result's argument (after the workgroup
/// number) and how each input is read (one more, the result's own
/// element, where the body reads what the result held). Else failure.
struct StepEpilogue {
  linalg::GenericOp op;
  unsigned out = 0;
  SmallVector<EpilogueInput> inputs;

  /// kGpuEpilogueAttr's value: out, then the non-product inputs' arguments.
  SmallVector<int64_t> arguments() const;
};
FailureOr<StepEpilogue> matchGpuEpilogue(func::FuncOp kernel, linalg::GenericOp matmul, linalg::GenericOp epilogue);

/// `buffer` (a kernel argument, contiguous from offset 0) as the identity
/// layout memref `want` of as many elements: how a generated kernel reads a
/// step's whole buffer in its own shape.
Value reinterpretWhole(OpBuilder &b, Location loc, Value buffer, MemRefType want);

/// The epilogue nova-gpu-threads fused into `kernel` (kGpuEpilogueAttr),
/// matched again: null when the kernel has none, failure with `error` when
/// it is no longer the one recorded.
FailureOr<std::optional<StepEpilogue>> fusedEpilogue(func::FuncOp kernel, std::string &error);

/// Adds gpu.func `name` to `module` for `kernel` as `plan` says; its
/// arguments are the kernel's after the workgroup number (split-K: the
/// last is where the partial products go).
FailureOr<gpu::GPUFuncOp> buildStepMmaMatmul(gpu::GPUModuleOp module, StringRef name, func::FuncOp kernel,
                                             const StepMmaPlan &plan, std::string &error);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_STEPMMAMATMUL_H
