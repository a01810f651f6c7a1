//===- Passes.td - every nova pass ------------------------------*- tablegen -*-===//
//
// One record per pass; each pass has a .cpp of the same stem and a lit test
// named after its flag (tests/lit/<dir>/<flag without nova->.mlir).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_PASSES
#define NOVA_PASSES

include "mlir/Pass/PassBase.td"

def NovaAutodiff : Pass<"nova-autodiff", "mlir::ModuleOp"> {
  let summary = "Replace nova.gradient ops with reverse-mode derivative code";
  let description = [{
    For each `%g = nova.gradient %loss wrt %a, %b`, builds the backward pass
    right before it: the ops between the `wrt` values and the loss are walked
    in reverse, and each builds its vector-Jacobian product through the
    NovaDifferentiable interface (no switch over op names). Cotangents of
    values used several times are summed; values that do not depend on a
    `wrt` value (integer labels, constants) get none; a `wrt` value the loss
    does not depend on gets zeros. Forward, backward and whatever uses the
    gradients (an optimizer update) end up in one function.

    Before: `%g = nova.gradient %l wrt %x : tensor<f32>, tensor<4xf32>`
    After:  the VJP ops of every op on the path from %x to %l, and %g
            replaced by the cotangent of %x.
  }];
}

def NovaLowerToLinalg : Pass<"nova-lower-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower nova ops to linalg/tensor/arith/math on tensors";
  let description = [{
    Elementwise ops become one `linalg.generic` each (later fused by
    linalg-fuse-elementwise-ops); matmul a contraction `linalg.generic`;
    reductions a `linalg.generic` with reduction iterators over a filled init;
    broadcast a generic with constant-0 indexing for stretched dims; reshape a
    collapse to 1-D and an expand; transpose `linalg.transpose`; softmax is
    first rewritten into nova reduce/broadcast/exp/div ops.

    Before: `%0 = nova.add %a, %b : tensor<4xf32>, tensor<4xf32>`
    After:  `%0 = linalg.generic {...} ins(%a, %b) outs(%empty) { arith.addf }`
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::scf::SCFDialect"];
}

def NovaDestinationPassing : Pass<"nova-destination-passing", "mlir::ModuleOp"> {
  let summary = "Turn tensor function signatures into memref in/out parameters";
  let description = [{
    The runtime allocates every output; compiled code writes into it. For each
    public function, tensor arguments become memref arguments read through
    `bufferization.to_tensor restrict`, each result becomes a trailing memref
    argument written with `bufferization.materialize_in_destination`, and the
    function gets `llvm.emit_c_interface` so the runtime can call it with
    memref descriptors.

    Before: `func.func @step(%x: tensor<4xf32>) -> tensor<4xf32>`
    After:  `func.func @step(%x: memref<4xf32>, %out0: memref<4xf32>)`
  }];
  let dependentDialects = ["mlir::bufferization::BufferizationDialect",
                           "mlir::memref::MemRefDialect"];
}

def NovaFuseElementwise : Pass<"nova-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Fuse elementwise linalg producers into consumers that read each element once";
  let description = [{
    linalg's elementwise fusion, restricted: a producer is fused into a
    consumer only if the consumer reads the producer's result through a
    permutation of all its loops, i.e. once per element. Chains of
    elementwise ops and reductions of them fuse; a contraction (which reads an
    operand once per output column) or a broadcast never absorbs a producer,
    which would recompute it many times.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def NovaVectorizeMatmul : Pass<"nova-vectorize-matmul", "mlir::ModuleOp"> {
  let summary = "Register-blocked vector code for matmul contractions on memrefs";
  let description = [{
    Rewrites each bufferized `linalg.generic` tagged `nova.kernel = "matmul"`
    (loops batch..., m, k, n; lhs [m, k] or [k, m]; rhs [k, n]) into loops over
    MR x NR tiles of the result (MR rows, NR = 2 vectors of columns) whose
    k loop keeps MR * 2 vector accumulators in registers: per k, two vector
    loads of a rhs row, MR scalar loads of lhs broadcast, 2 MR FMAs.
    Column tiles (and batch dims) are the outer loop, an scf.parallel when
    the kernel is big enough to be worth threads, so a rhs panel stays in
    one core's cache across row tiles. Rows and columns left over are handled by copies of the original
    generic on subviews (scalar loops later).
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "width of the target's vector registers in bits">,
    Option<"tileRows", "tile-rows", "int64_t", /*default=*/"6",
           "MR: result rows per register tile">,
    Option<"parallelMinFlops", "parallel-min-flops", "int64_t", /*default=*/"1048576",
           "kernels with at least this many flops run their column tiles as an "
           "scf.parallel (threads); smaller ones stay sequential">,
  ];
  let dependentDialects = ["mlir::vector::VectorDialect", "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::arith::ArithDialect"];
}

def NovaEarlyDealloc : Pass<"nova-early-dealloc", "mlir::ModuleOp"> {
  let summary = "Free each temporary right after its last use";
  let description = [{
    MLIR's ownership-based deallocation frees buffers at the end of the
    block that allocated them, so in a training step every temporary lives
    until the function returns and peak memory is the sum of all of them.
    This pass moves each `memref.dealloc` of a `memref.alloc` from the same
    block to right after the last op of that block that uses the buffer or
    a view of it (uses inside nested regions count for their parent op).
    Peak memory becomes the largest live set.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def NovaApproximateMath : Pass<"nova-approximate-math", "mlir::ModuleOp"> {
  let summary = "Replace f32 tanh, erf, exp, log... with inline polynomial approximations";
  let description = [{
    MLIR's polynomial approximations (a few ulp in f32) instead of libm calls:
    the loops around them then vectorize, and GELU no longer costs a libm
    call per element. f64 ops are left to libm / LLVM intrinsics.
  }];
  let dependentDialects = ["mlir::math::MathDialect", "mlir::arith::ArithDialect",
                           "mlir::vector::VectorDialect"];
}

#endif // NOVA_PASSES
