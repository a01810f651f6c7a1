//===- CudaTarget.h - the CUDA target ---------------------------*- C++ -*-===//
//
// The shared stages run for a GPU description; each kernel is configured
// for it (matmuls by GpuConfigurator.h, the rest as GPU threads by
// GpuThreads.cpp, tensor-core matmuls re-planned by StepMmaMatmul.h),
// outlined to a gpu.func, and emitted as PTX (PtxEmitter.h), plus the cubin
// for the chip where ptxas is here (PtxAssembler.h).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_CUDATARGET_H
#define NOVA_COMPILER_TARGET_CUDA_CUDATARGET_H

#include "compiler/target/Target.h"

namespace mlir::nova {

class CudaTarget final : public Target {
public:
  using Target::Target;
  void addBeforeFusionPasses(OpPassManager &pm) const override;
  bool fusesMatmulPrologues() const override { return false; }
  /// No: on the H200 the recomputed forward took 0.109 to 0.113 ms a layer
  /// of the medium GPT step (10.3 to 10.7% of its bf16 kernel time), for 16
  /// MiB (bf16) to 32 MiB (fp32) of that step's arena (bench/README.md).
  bool recomputesAttention() const override { return false; }
  void addConfigurePasses(OpPassManager &pm) const override;
  std::vector<Stage> codegenStages() const override;
  FailureOr<Artifact> emit(ModuleOp kernels, const PipelineOptions &options, CompileReport &report,
                           std::string &error) const override;
};

/// On each kernel the GPU configurator decided: its explanation, one line
/// per string (NOVA_EXPLAIN).
inline constexpr const char kGpuWhyAttr[] = "nova.gpu_why";
/// A configured GPU kernel's threads per block and dynamic shared memory
/// (bytes), for the launch plan's KernelDesc.
inline constexpr const char kGpuBlockThreadsAttr[] = "nova.gpu_block_threads";
inline constexpr const char kGpuSharedBytesAttr[] = "nova.gpu_shared_bytes";
/// A configured GPU kernel launched in clusters: its CTAs a cluster along x
/// (absent: none), for the KernelDesc's cluster.
inline constexpr const char kGpuClusterAttr[] = "nova.gpu_cluster";
/// The operand type a step's mma.sync matmul kernel was planned with.
inline constexpr const char kGpuOperandAttr[] = "nova.gpu_operand";
/// On a kernel whose output's fill was dropped (GpuThreads.cpp): the value
/// (a FloatAttr) its one output starts from instead of the buffer's: a
/// simt matmul's accumulators, each point's element stored before its
/// reduction loops, a block's or a warp's total folded into it.
inline constexpr const char kGpuOutputInitAttr[] = "nova.gpu_output_init";
/// The most bytes of parameters a CUDA kernel may take (ptxas, PTX ISA
/// before 8.1), and the bytes of each of a Nova kernel's (bare pointers,
/// tensor maps' addresses, index values).
inline constexpr int64_t kMaxKernelParameterBytes = 4352, kKernelParameterBytes = 8;

/// On a kernel that folds a split reduction's parts into its result
/// (buildPartsTotal, GpuColumnReduction.h).
inline constexpr const char kGpuPartsTotalAttr[] = "nova.gpu_parts_total";
/// A kernel of independent structured ops side by side (GpuThreads.cpp):
/// each op's blocks, in order (a block's index selects its op).
inline constexpr const char kGpuSideBySideAttr[] = "nova.gpu_side_by_side";
/// ... and each op's output start (a FloatAttr, kGpuOutputInitAttr's, or a
/// UnitAttr for none).
inline constexpr const char kGpuSideBySideInitsAttr[] = "nova.gpu_side_by_side_inits";
/// A step's matmul kernel split across K into this many parts: its last
/// argument is their partial products (parts x m x n), which the kernel
/// `<name>_total` launched after it adds into the result (the mma.sync
/// kernel keeps the result among its arguments; the simt kernel's
/// workspace took its place).
inline constexpr const char kGpuSplitKAttr[] = "nova.gpu_split_k";
/// A step's scatter-add kernel split over its indices into this many parts
/// (GpuScatterAddParts.h): its last argument holds the parts' own tables,
/// and its loop marked kGpuPartLoopAttr runs one part a block group.
inline constexpr const char kGpuScatterPartsAttr[] = "nova.gpu_scatter_parts";
inline constexpr const char kGpuPartLoopAttr[] = "nova.gpu_part_loop";
/// A step's matmul kernel (tensor-core or simt) that also runs the
/// elementwise op after it on each result, in registers
/// (GpuMatmulEpilogue.h; StepMmaMatmul.h, matchGpuEpilogue): [the result's
/// argument, then the arguments of the op's inputs other than the
/// product, in order], numbered after the workgroup number. The kernel
/// writes only the result.
inline constexpr const char kGpuEpilogueAttr[] = "nova.gpu_epilogue";
/// A step's wgmma matmul kernel: the arguments it takes as TMA tensor maps,
/// one array each: [argument, element bytes, swizzle bytes, rank, dims...,
/// strides (rank - 1)..., box...] (StepMmaMatmul.h; the launch plan's
/// KernelDesc::tensor_maps).
inline constexpr const char kGpuTensorMapsAttr[] = "nova.gpu_tensor_maps";

/// --nova-configure-gpu-kernels{target=sm_90a}: each kernel's
/// #nova.lowering_config for the GPU (the pass CudaTarget adds).
std::unique_ptr<Pass> createGpuConfigureKernels(const ::nova::TargetDesc &target);
void registerGpuConfigureKernels();

/// --nova-gpu-bf16-operands{target=sm_90a} (GpuBf16Operands.cpp): with bf16
/// matmuls asked for, each product that tensor cores can take reads bf16
/// copies of its f32 operands.
std::unique_ptr<Pass> createGpuBf16Operands(const ::nova::TargetDesc &target);
void registerGpuBf16Operands();

/// GpuThreads.cpp: every kernel as scalar GPU threads.
std::unique_ptr<Pass> createGpuThreadsConfigure(const ::nova::TargetDesc &target);
std::unique_ptr<Pass> createGpuMapThreads();
std::unique_ptr<Pass> createGpuOutlineKernels(const ::nova::TargetDesc &target);
void registerGpuThreadsPasses();

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_CUDATARGET_H
