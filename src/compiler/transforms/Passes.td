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

def NovaFoldTransposes : Pass<"nova-fold-transposes", "mlir::ModuleOp"> {
  let summary = "Let matmuls read transposed operands in place instead of through a copy";
  let description = [{
    On bufferized code, a `linalg.transpose` into a fresh buffer that only
    matmul kernels read as an operand (attention's head split, a weight
    transposed for the backward) becomes a `memref.transpose` view of its
    source: the matmul reads the source in the permuted order, and the copy
    and its buffer disappear. It applies when the source is not written
    between the transpose and its last reader, and the view keeps what the
    matmul lowering needs of that operand (a unit-stride last or k
    dimension for the rhs, a unit-stride last dimension for a transposed
    lhs).

    Before: `linalg.transpose ins(%src) outs(%tmp) permutation = [1, 0]`, `%tmp` used by a matmul
    After:  `%v = memref.transpose %src (d0, d1) -> (d1, d0)` used by the matmul
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def NovaOutlineKernels : Pass<"nova-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Cut the bufferized step into kernels and a launch plan";
  let description = [{
    Every op of a bufferized step that computes (a linalg op, a copy, a loop
    nest) becomes a kernel: a `func.func` in the nested `module @kernels`
    taking the workgroup number and the root buffers it touches (step
    arguments and allocations, with static identity layouts), with the views
    and constants it needs cloned in. The op is replaced by a `nova.launch`.
    What remains of the step is the launch plan: `memref.alloc`,
    `nova.launch`, `memref.dealloc`, `return`. memref.copy becomes
    linalg.copy first, so copies are structured ops that can be split too.

    Before: `linalg.generic ... ins(%arg0 : memref<4xf32>) outs(%alloc : memref<4xf32>)`
    After:  `nova.launch @kernels::@k0(%arg0, %alloc) : memref<4xf32>, memref<4xf32>`
            and `func.func @k0(%wg: index, %a: memref<4xf32>, %b: memref<4xf32>)` in `@kernels`.

    A matmul and the elementwise op of its product that a matmul kernel
    runs on its results in registers (isRegisterEpilogue) stay one kernel,
    also where that op's result is a narrower float than the product (a
    bf16 copy of it).
  }];
  let dependentDialects = ["mlir::nova::NovaDialect", "mlir::linalg::LinalgDialect",
                           "mlir::memref::MemRefDialect"];
}

def NovaDedupKernels : Pass<"nova-dedup-kernels", "mlir::ModuleOp"> {
  let summary = "Keep one copy of structurally identical kernels";
  let description = [{
    Two kernels whose bodies print identically (generic form, names aside)
    compute the same thing on buffers of the same types: the same layer's
    kernel in every transformer block, the same optimizer update for every
    parameter of a shape. Launches of a duplicate are redirected to the
    first one and the duplicate is erased, so each distinct kernel is
    configured and compiled once.
  }];
}

def NovaBucketAllReduce : Pass<"nova-bucket-all-reduce", "mlir::ModuleOp"> {
  let summary = "Group the gradients' sums over the ranks into buckets placed in the launch plan";
  let description = [{
    After nova-outline-kernels, on the step: the memref nova.all_reduce ops
    (one per gradient) are grouped, in the order their gradients are
    produced, into buckets of at most `bucket-bytes` of one element type
    (a larger gradient is a bucket of its own). Each bucket becomes a
    `nova.all_reduce_start` right after the launch producing its last
    gradient and a `nova.all_reduce_wait` right before the first launch
    reading one of its sums, so the sums run while the rest of the backward
    does. A gradient that is part of a larger buffer is refused.

    Before: `nova.launch @kernels::@k7(..., %g)` ... `nova.all_reduce outs(%g : memref<256xf32>)`
            ... `nova.launch @kernels::@k9(%g, ...)`
    After:  `nova.launch @kernels::@k7(..., %g)`
            `nova.all_reduce_start(%g) {bucket = 0 : i64} : memref<256xf32>` ...
            `nova.all_reduce_wait(%g) {bucket = 0 : i64} : memref<256xf32>`
            `nova.launch @kernels::@k9(%g, ...)`
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "Bytes per bucket; 0: the module's nova.bucket_bytes, else 25 MiB">,
  ];
}

def NovaConfigureKernels : Pass<"nova-configure-kernels", "mlir::ModuleOp"> {
  let summary = "Give every kernel its #nova.lowering_config from the target's configurator";
  let description = [{
    A pure function of (kernel, shapes, dtypes, target facts): the kernel's
    kind (matmul, loops, serial), its workgroup grid and tiles. The target
    facts are this pass's options; the compiler fills them from the
    TargetDesc it compiles for. The decision is written as
    `nova.lowering_config` on the kernel function.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "width of the target's vector registers in bits">,
    Option<"vectorRegisters", "vector-registers", "int64_t", /*default=*/"32",
           "vector registers per core">,
    Option<"cores", "cores", "int64_t", /*default=*/"1",
           "cores (threads) the code is configured for">,
    Option<"l1dBytes", "l1d-bytes", "int64_t", /*default=*/"49152", "L1 data cache per core">,
    Option<"l2Bytes", "l2-bytes", "int64_t", /*default=*/"2097152", "L2 cache per core">,
    Option<"fmaUnits", "fma-units", "int64_t", /*default=*/"2", "FMA pipes per core">,
    Option<"fmaLatency", "fma-latency", "int64_t", /*default=*/"4", "FMA latency in cycles">,
    Option<"amxBf16", "amx-bf16", "bool", /*default=*/"false",
           "the target has AMX tiles with bf16 products (used for the matmuls of a "
           "module whose nova.matmul_precision is bf16)">,
    Option<"avx512Bf16", "avx512-bf16", "bool", /*default=*/"false",
           "the target has AVX512-BF16 dot products (used, without AMX, for the "
           "matmuls of a module whose nova.matmul_precision is bf16)">,
  ];
}

def NovaDistributeWorkgroups : Pass<"nova-distribute-workgroups", "mlir::ModuleOp"> {
  let summary = "Restrict each `loops` kernel to the tile of its workgroup";
  let description = [{
    For a kernel configured `loops` with several workgroups, the root op is
    tiled by the config's `tile` (linalg tiling: scf.for over tiles with
    subviews), and each tile loop is narrowed to the one tile that the
    workgroup number selects (row-major over the tile loops). Workgroups then
    write disjoint parts of the result and may run in any order. `matmul`
    kernels are distributed by nova-vectorize-matmul; `serial` ones run whole.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::affine::AffineDialect",
                           "mlir::arith::ArithDialect"];
}

def NovaVectorizeRows : Pass<"nova-vectorize-rows", "mlir::ModuleOp"> {
  let summary = "Vector code for nova.layer_norm_kernel and nova.cross_entropy_kernel, rows split over workgroups";
  let description = [{
    Expands each bufferized `nova.layer_norm_kernel` and
    `nova.cross_entropy_kernel` of a kernel configured `rows`: workgroup wg
    takes rows [wg t, wg t + t) (t = `tile[0]`) of the input viewed as
    [N, d], `register_tile[0]` rows at a time through each pass over their
    vectors of `register_tile[1]` lanes. LayerNorm: mean, variance, then the
    result (forward) or the two gradient sums and dx (backward).
    Cross-entropy: the row's max, the sum of exponentials, then the loss
    (forward) or dx (backward). An op outside a configured kernel runs all
    its rows in one workgroup.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "width of the target's vector registers in bits (unconfigured ops)">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
                           "mlir::math::MathDialect",
                           "mlir::memref::MemRefDialect", "mlir::scf::SCFDialect",
                           "mlir::vector::VectorDialect"];
}

def NovaVectorizeAttention : Pass<"nova-vectorize-attention", "mlir::ModuleOp"> {
  let summary = "Vector code for nova.attention_kernel, one workgroup per (batch, head)";
  let description = [{
    Expands each bufferized `nova.attention_kernel` (forward, or with
    `backward` its gradient) of a kernel configured `attention`: workgroup
    wg runs head (wg / heads, wg % heads) on its columns of qkv in place,
    query rows in blocks of `register_tile[0]`, only the causal half of the
    scores, kept in a rows x T scratch (never a T x T buffer); every product
    a register-tiled loop of broadcast lhs x contiguous rhs rows,
    `register_tile[1]` columns wide. The backward recomputes the
    probabilities from q and k. An op outside a configured kernel loops
    over all heads in one workgroup.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "width of the target's vector registers in bits">,
    Option<"dotBf16", "dot-bf16", "bool", /*default=*/"false",
           "the target has AVX512-BF16 dot products: with bf16 matmuls asked for "
           "(nova.matmul_precision), the forward's and the backward's products "
           "take bf16 operands">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
                           "mlir::math::MathDialect",
                           "mlir::memref::MemRefDialect", "mlir::scf::SCFDialect",
                           "mlir::vector::VectorDialect", "mlir::LLVM::LLVMDialect"];
}

def NovaBf16SavedActivations : Pass<"nova-bf16-saved-activations", "mlir::ModuleOp"> {
  let summary = "Products' outputs kept for the backward made in bf16 where the module asks for it";
  let description = [{
    On tensors, before elementwise fusion. Where the module asks for
    activations in bf16 (`nova.activation_precision = "bf16"`, from
    nova/precision.hpp's ActivationPrecision), a value that a product makes
    (a tagged matmul's result, or an elementwise op of one: its bias add)
    and that only elementwise ops read (also through reshapes), the last of
    them `kept-ops` computing (destination-style) ops or more after it (kept
    from the forward for the backward), is read as a bf16 copy (Bf16Copies.h `roundedCopy`, round to
    nearest even) instead: each reader's body widens it (`arith.extf`).
    Fusion then makes the value in bf16 where it is made (the product's
    narrowing epilogue) and it never exists in f32: in a GPT the MLP's
    pre-activation, kept in half the bytes, as PyTorch's autocast keeps a
    linear layer's output.
  }];
  let options = [
    Option<"keptOps", "kept-ops", "int64_t", /*default=*/"16",
           "computing ops from the value to its last reader from which it counts as kept for the backward">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def NovaBf16AttentionQkv : Pass<"nova-bf16-attention-qkv", "mlir::ModuleOp"> {
  let summary = "With bf16 matmuls on AVX512-BF16, attention's qkv made in bf16 where only attention reads it";
  let description = [{
    On tensors, before elementwise fusion. Where the module asks for bf16
    matmuls (`nova.matmul_precision`) and the CPU has AVX512-BF16 dot
    products on 512-bit vectors (`dot-bf16`), nova-vectorize-attention
    rounds q, k and v to bf16 as it packs them for every product of the
    forward and the backward (`attentionDotsBf16`: heads a multiple of 32
    columns). A qkv value that only such attention kernels read (also
    through reshapes) is then read as its bf16 copy instead
    (Bf16Copies.h `copyAttentionQkv`, as on the GPU): the same values reach
    the products, rounded once where qkv is made, and the backward keeps
    half the bytes.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "width of the target's vector registers in bits">,
    Option<"dotBf16", "dot-bf16", "bool", /*default=*/"false",
           "the target has AVX512-BF16 dot products">,
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def NovaDropUnstoredResults : Pass<"nova-drop-unstored-results", "mlir::ModuleOp"> {
  let summary = "Take a matmul result that only lives in registers out of its kernel and the plan";
  let description = [{
    After nova-configure-kernels, on the step and its `module @kernels`: a
    `matmul` kernel (not `amx_matmul`) whose register tiles all pass through
    its epilogue in one slab (K within the cache tile, N a multiple of the
    register tile's columns, a zero fill) never touches its result buffer.
    Where every launch passes that buffer as an allocation used by nothing
    else, the kernel parameter becomes a `nova.unstored` placeholder
    allocation (erased by nova-vectorize-matmul), and the launches' operand
    and the allocation go: the arena holds one buffer fewer. `nova.in_place
    = false` on the module turns it off.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def NovaVectorizeMatmul : Pass<"nova-vectorize-matmul", "mlir::ModuleOp"> {
  let summary = "Register-blocked vector code for matmul kernels, split over workgroups";
  let description = [{
    Rewrites the bufferized `linalg.generic` tagged `nova.kernel = "matmul"`
    (loops batch..., m, k, n; lhs [m, k] or [k, m]; rhs [k, n]) of each
    kernel configured `matmul`. The workgroup number selects one block of
    the result (the config's `tile` over batch..., m, n); inside it, the
    reduction is swept in slabs of kc (`cache_tile`), and for each slab MR x
    NR register tiles (`register_tile`; NR = nv vectors) keep MR nv vector
    accumulators through the k loop: per k, nv vector loads of a rhs row, MR
    scalar loads of lhs broadcast, MR nv FMAs. Column tiles are outside row
    tiles, so the kc x NR rhs micro-panel stays in L1 across row tiles.
    Rows and columns of the block past the last full register tile run as
    the original generic on subviews. A matmul outside a configured kernel
    is done as one workgroup with MR = `tile-rows`, NR = 2 vectors, no slabs.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", /*default=*/"512",
           "width of the target's vector registers in bits (unconfigured matmuls)">,
    Option<"tileRows", "tile-rows", "int64_t", /*default=*/"6",
           "MR for unconfigured matmuls">,
  ];
  let dependentDialects = ["mlir::vector::VectorDialect", "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::arith::ArithDialect",
                           "mlir::amx::AMXDialect", "mlir::LLVM::LLVMDialect"];
}

def NovaRematerialize : Pass<"nova-rematerialize", "mlir::ModuleOp"> {
  let summary = "Recompute cheap forward values at their late (backward) uses where that extends no other lifetime";
  let description = [{
    On the nova dialect after autodiff and CSE: a value of an elementwise op,
    GELU, LayerNorm or fused causal attention whose uses have a gap of at
    least `min-gap` ops, and
    whose op's operands are all live after the gap, is recomputed by a clone
    (`nova.rematerialized`) right before the first use after the gap, which with the
    later uses reads the clone. The original then dies at its early uses.
    The module's integer `nova.remat` is the level: 0 leaves it alone, 1
    (the default) recomputes the cheap ops, and attention as `attention`
    says (the target's choice) unless the module's `nova.remat_attention`
    says otherwise, 2 also matmuls, softmaxes, slices, reductions and
    attention.
  }];
  let options = [
    Option<"minGap", "min-gap", "int64_t", /*default=*/"16",
           "the fewest ops between two uses worth a recomputation">,
    Option<"attention", "attention", "bool", /*default=*/"true",
           "level 1 recomputes fused attention (where nova.remat_attention does not say)">,
  ];
}

def NovaFuseMatmulPrologue : Pass<"nova-fuse-matmul-prologue", "mlir::ModuleOp"> {
  let summary = "Fuse an elementwise producer of a matmul lhs into the matmul";
  let description = [{
    A `nova.kernel = "matmul"` generic whose lhs ([.., k, m] or [.., m, k])
    is the one use of an elementwise generic (all loops parallel, inputs
    read through the identity map, arith and math ops), possibly through
    one reshape, takes the producer's inputs (reshaped the same way) in
    place of its lhs, with the producer's body before its multiply. The
    register kernel runs that body while it packs the lhs (once per block),
    so the producer's result is never stored: in the GPT's backward, the
    recomputed GELU for the MLP's weight gradient, the largest buffer at the
    peak; in the forward, the GELU before the MLP's second matmul (a
    row-major lhs, which the kernel then packs instead of reading it in
    place). bf16 matmuls are not fused (their AMX packing differs).
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::tensor::TensorDialect"];
}

def NovaReuseDyingInputs : Pass<"nova-reuse-dying-inputs", "mlir::ModuleOp"> {
  let summary = "Write an elementwise op's result over an input that dies at it";
  let description = [{
    On linalg at tensor level, before bufferization: an all-parallel
    `linalg.generic` with one result whose destination is a `tensor.empty`
    gets as its destination instead an input of the same type, read
    through the same identity map, whose every other use comes before it in
    the block, and which is itself computed into a fresh tensor. The op then
    reads and writes each element of that one buffer, which one-shot
    bufferization keeps in place: one buffer of that size fewer is live
    there. A contraction's result (also through a reshape) is not written
    over: it is its register epilogue's to read, and then needs no buffer
    (nova-drop-unstored-results); in the GPT's MLP backward the GELU
    gradient goes over the dying GELU input instead. Results the function
    returns keep their own destination (they are computed into the caller's
    buffers). `nova.in_place = false` on the module turns it off.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def NovaMergeDisjointSums : Pass<"nova-merge-disjoint-sums", "mlir::ModuleOp"> {
  let summary = "A sum of zero-padded parts that do not overlap becomes the parts inserted into one buffer";
  let description = [{
    On linalg on tensors: an elementwise generic that only adds its inputs,
    each input a chain of `tensor.insert_slice`s (static boxes) into a zero
    `linalg.fill`, with no two boxes overlapping, is replaced by all those
    inserts into one buffer: filled with zero only where the boxes leave
    gaps, not at all when they cover it. Each element of the sum has one
    non-zero term, so the result is the same value (the sign of a zero
    aside). This is the gradient of a tensor sliced into parts: the fused
    QKV projection's gradient from the gradients of q, k and v, which was
    three full-size fills and a three-way sum.

    Before: `%s = linalg.generic (sum) ins(insert(%a into fill 0), insert(%b into fill 0))`
    After:  `%s = insert(%b into insert(%a into tensor.empty))` (boxes covering it)
  }];
  let dependentDialects = ["mlir::tensor::TensorDialect"];
}

def NovaShareRowStatistics : Pass<"nova-share-row-statistics", "mlir::ModuleOp"> {
  let summary = "Row kernels of the same rows share the statistics their first forward computes";
  let description = [{
    On the kernel ops on tensors. A cross-entropy's backward needs each
    row's max m and sum s of exp(x - m), which its forward computed; a
    LayerNorm's backward, and its VJP's normalized input (a second forward
    with gamma 1, beta 0), need each row's mean and rstd, which the forward
    computed. Where a row kernel has an earlier forward of the same rows in
    its block (a cross-entropy: the same logits and labels; a LayerNorm:
    the same input and eps), that forward gets a second init, stats
    [..., 2], into which it writes the statistics, and the later kernel
    takes them as a fourth input instead of two passes over each row
    recomputing them: the cross-entropy backward becomes one pass over the
    logits instead of three (and each logit's exponential is taken twice
    in the step instead of three times), the LayerNorm backward two instead
    of four. The normalized input (gamma 1, beta 0) becomes the elementwise
    op it then is, (x - mean) rstd over the input and the stats, which
    nova-fuse-elementwise fuses into its consumer (the column sum of
    g xhat that is d(gamma)): no kernel and no [..., d] buffer of its own.
    The statistics are the values the forward's formulas gave, read
    instead of recomputed.
    The stats cost 2 values a row.

    Before: `%l = cross_entropy_kernel ins(%x, %y) outs(%e)`,
            `%d = cross_entropy_kernel ins(%x, %y, %g) outs(%e2) {backward}`
    After:  `%l, %s = cross_entropy_kernel ins(%x, %y) outs(%e, %e3)`,
            `%d = cross_entropy_kernel ins(%x, %y, %g, %s) outs(%e2) {backward}`
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def NovaRelaxReductions : Pass<"nova-relax-reductions", "mlir::ModuleOp"> {
  let summary = "Allow reductions to be reassociated, so they vectorize";
  let description = [{
    A strictly ordered floating-point sum cannot use vector lanes: each add
    waits for the previous one. This pass puts `fastmath<reassoc, contract>`
    on the floating-point arithmetic in the body of every linalg op with a
    reduction loop, so LLVM may keep several partial sums (in vector lanes
    and across unrolled iterations) and combine them at the end, and fuse a
    multiply and an add. The result differs from the sequential sum by
    rounding only, within the fp32 tolerances Nova's tests check against the
    float64 interpreter, and is the same on every run of the compiled code.
  }];
}

def NovaEmitKernelEntries : Pass<"nova-emit-kernel-entries", "mlir::ModuleOp"> {
  let summary = "Give each lowered kernel the runtime's entry point";
  let description = [{
    After lowering to the LLVM dialect (bare-pointer memrefs), each kernel
    `@k3(i64 %wg, ptr, ptr, ...)` gets an exported entry
    `@nova_k3(i64 %wg, ptr %args)` that loads the argument pointers from the
    array the runtime passes and calls the kernel, which becomes internal
    (and is inlined). One ABI for every kernel, whatever its arity.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // NOVA_PASSES
