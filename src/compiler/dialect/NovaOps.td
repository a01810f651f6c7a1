//===- NovaOps.td - nova ops ------------------------------------*- tablegen -*-===//
//
// Families: elementwise (unary, binary), contraction (matmul), layout
// (broadcast, reshape, transpose), reductions and softmax, constants.
// Elementwise binary ops take equal shapes: the front end makes broadcasting
// explicit with nova.broadcast, so autodiff can reduce a cotangent back to
// the operand's shape by looking at one op.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_OPS
#define NOVA_OPS

include "NovaDialect.td"
include "NovaInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/SymbolInterfaces.td"

def Nova_FloatTensor : RankedTensorOf<[F32, F64]>;
def Nova_AnyTensor : RankedTensorOf<[F32, F64, I32, I64]>;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Nova_UnaryOp<string mnemonic, string doc, list<Trait> traits = []>
    : Nova_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>])> {
  let summary = doc;
  let arguments = (ins Nova_FloatTensor:$input);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class Nova_BinaryOp<string mnemonic, string doc, list<Trait> traits = []>
    : Nova_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>])> {
  let summary = doc;
  let arguments = (ins Nova_FloatTensor:$lhs, Nova_FloatTensor:$rhs);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Nova_NegOp   : Nova_UnaryOp<"neg",   "-x">;
def Nova_ExpOp   : Nova_UnaryOp<"exp",   "e^x">;
def Nova_LogOp   : Nova_UnaryOp<"log",   "natural logarithm">;
def Nova_TanhOp  : Nova_UnaryOp<"tanh",  "hyperbolic tangent">;
def Nova_SqrtOp  : Nova_UnaryOp<"sqrt",  "square root">;
def Nova_RsqrtOp : Nova_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Nova_ReluOp  : Nova_UnaryOp<"relu",  "max(x, 0)">;
def Nova_ErfOp   : Nova_UnaryOp<"erf",   "the error function">;

def Nova_GeluOp : Nova_Op<"gelu", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "GELU activation";
  let description = [{
    `approximate = true`: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-2).
    `approximate = false`: 0.5 x (1 + erf(x / sqrt(2))).
  }];
  let arguments = (ins Nova_FloatTensor:$input,
                       DefaultValuedAttr<BoolAttr, "true">:$approximate);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Nova_AddOp : Nova_BinaryOp<"add", "lhs + rhs", [Commutative]>;
def Nova_SubOp : Nova_BinaryOp<"sub", "lhs - rhs">;
def Nova_MulOp : Nova_BinaryOp<"mul", "lhs * rhs", [Commutative]>;
def Nova_DivOp : Nova_BinaryOp<"div", "lhs / rhs">;
def Nova_MaxOp : Nova_BinaryOp<"max", "max(lhs, rhs); NaN if either is NaN",
                               [Commutative]>;

def Nova_GreaterOp : Nova_Op<"greater", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "1.0 where lhs > rhs, else 0.0 (a mask; its derivative is zero)";
  let arguments = (ins Nova_FloatTensor:$lhs, Nova_FloatTensor:$rhs);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

//===----------------------------------------------------------------------===//
// Contraction
//===----------------------------------------------------------------------===//

def Nova_MatmulOp : Nova_Op<"matmul", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "(batched) matrix product with optional transposed operands";
  let description = [{
    Both operands have the same rank r >= 2; the leading r-2 dims are batch
    dims and must be equal. With `transpose_a`, lhs is [..., k, m] instead of
    [..., m, k]; with `transpose_b`, rhs is [..., n, k] instead of [..., k, n].
    The result is [..., m, n].
  }];
  let arguments = (ins Nova_FloatTensor:$lhs, Nova_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

def Nova_BroadcastOp : Nova_Op<"broadcast", [Pure,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "numpy-style broadcast to the result shape";
  let description = [{
    Shapes are aligned on the right; each input dim must equal the result dim
    or be 1. The result may have more leading dims than the input.
  }];
  let arguments = (ins Nova_AnyTensor:$input);
  let results = (outs Nova_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Nova_ReshapeOp : Nova_Op<"reshape", [Pure,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "row-major reshape to a result with the same element count";
  let arguments = (ins Nova_AnyTensor:$input);
  let results = (outs Nova_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Nova_TransposeOp : Nova_Op<"transpose", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "permute dims: result dim i is input dim permutation[i]";
  let arguments = (ins Nova_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Nova_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Nova_SliceOp : Nova_Op<"slice", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "a static box of the input: input[offsets : offsets + sizes]";
  let arguments = (ins Nova_AnyTensor:$input, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Nova_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Nova_PadOp : Nova_Op<"pad", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "zero padding: `low[i]` zeros before and `high[i]` after dim i";
  let description = [{ The transpose of nova.slice (its gradient). }];
  let arguments = (ins Nova_FloatTensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Nova_ReduceOp<string mnemonic, string doc>
    : Nova_Op<mnemonic, [Pure, InferTypeOpAdaptor,
        DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = doc;
  let description = [{
    Reduces over `axes` (sorted, unique, in range). With `keep_dims` the
    reduced dims stay as size 1; otherwise they are dropped.
  }];
  let arguments = (ins Nova_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "false">:$keep_dims);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Nova_ReduceSumOp  : Nova_ReduceOp<"reduce_sum",  "sum over axes">;
def Nova_ReduceMeanOp : Nova_ReduceOp<"reduce_mean", "mean over axes">;
def Nova_ReduceMaxOp  : Nova_ReduceOp<"reduce_max",  "maximum over axes">;

def Nova_SoftmaxOp : Nova_Op<"softmax", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "numerically stable softmax along one axis";
  let description = [{ exp(x - max(x)) / sum(exp(x - max(x))) along `axis`. }];
  let arguments = (ins Nova_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Nova_LogSoftmaxOp : Nova_Op<"log_softmax", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "numerically stable log(softmax(x)) along one axis";
  let description = [{ x - max(x) - log(sum(exp(x - max(x)))) along `axis`. }];
  let arguments = (ins Nova_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Indices
//===----------------------------------------------------------------------===//

def Nova_OneHotOp : Nova_Op<"one_hot", [Pure]> {
  let summary = "one-hot encoding of integer class indices";
  let description = [{
    Result [..., C] (float) holds 1.0 at [..., labels[...]] and 0.0
    elsewhere; C is the result's last dim. A label outside [0, C) gives a row
    of zeros.
  }];
  let arguments = (ins RankedTensorOf<[I32, I64]>:$labels);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$labels attr-dict `:` type($labels) `->` type($result)";
  let hasVerifier = 1;
}

def Nova_GatherOp : Nova_Op<"gather", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "rows of a table: result[..., :] = table[indices[...], :]";
  let description = [{
    `table` is [rows, width]; the result is indices' shape + [width]. An
    index outside [0, rows) reads a row of zeros (never out of bounds). The
    gradient with respect to the table is nova.scatter_add.
  }];
  let arguments = (ins Nova_FloatTensor:$table, RankedTensorOf<[I32, I64]>:$indices);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$table `[` $indices `]` attr-dict `:` type($table) `,` type($indices)";
}

def Nova_ScatterAddOp : Nova_Op<"scatter_add", [Pure,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "zeros, then result[indices[...], :] += updates[..., :]";
  let description = [{
    The result is [rows, width] (its type says rows); `updates` is indices'
    shape + [width]. Repeated indices accumulate; an index outside
    [0, rows) is skipped.
  }];
  let arguments = (ins RankedTensorOf<[I32, I64]>:$indices, Nova_FloatTensor:$updates);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$indices `,` $updates attr-dict `:` type($indices) `,` type($updates) `->` type($result)";
  let hasVerifier = 1;
}

def Nova_CausalMaskOp : Nova_Op<"causal_mask", [Pure]> {
  let summary = "[T, S] additive attention mask: 0 where col <= row, -inf above";
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Nova_DropoutOp : Nova_Op<"dropout", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "inverted dropout with a counter-based (Philox4x32-10) mask";
  let description = [{
    Element i (row-major) is kept, scaled by 1 / (1 - rate), iff
    philox_uniform(seed, stream, i) >= rate, else zeroed; `seed` is a rank-0
    i64 tensor (a step input, so each step gets a fresh mask without
    recompiling) and `stream` separates the dropouts of one step. The mask
    is a pure function of (seed, stream, i): the VJP is the same dropout of
    the cotangent. Reference: include/nova/detail/philox.hpp.
  }];
  let arguments = (ins Nova_FloatTensor:$input, TensorOf<[I64]>:$seed, F64Attr:$rate,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$input `,` $seed attr-dict `:` type($input) `,` type($seed)";
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def Nova_LayerNormOp : Nova_Op<"layer_norm", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "LayerNorm over the last dim, then scale and shift";
  let description = [{
    Per row r of `input` [..., d]: mean m, biased variance s^2,
    result = (x - m) / sqrt(s^2 + eps) * gamma + beta, gamma and beta [d].
    One op so the target runs it as one pass per row block; its gradient
    with respect to the input is nova.layer_norm_grad, which recomputes
    the row statistics instead of keeping them.
  }];
  let arguments = (ins Nova_FloatTensor:$input, Nova_FloatTensor:$gamma, Nova_FloatTensor:$beta,
                       F64Attr:$eps);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma `,` $beta attr-dict `:` type($input) `,` type($gamma) `,` type($beta)";
}

def Nova_LayerNormGradOp : Nova_Op<"layer_norm_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "d(input) of nova.layer_norm from d(result)";
  let description = [{
    With xhat = (x - m) / sqrt(s^2 + eps) and g = grad * gamma, per row:
    result = (g - mean(g) - xhat mean(g xhat)) / sqrt(s^2 + eps).
  }];
  let arguments = (ins Nova_FloatTensor:$input, Nova_FloatTensor:$gamma, Nova_FloatTensor:$grad,
                       F64Attr:$eps);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma `,` $grad attr-dict `:` type($input) `,` type($gamma) `,` type($grad)";
  let hasVerifier = 1;
}

// The row kernels' result and row statistics (nova-share-row-statistics):
// inits = [result] or, for a forward writing them, [result, stats]; a
// kernel reading them takes them as its fourth input.
defvar rowStatsMethods = [{
    Value getInit() { return getInits()[0]; }
    /// The rows' statistics [..., 2]: the fourth input of a kernel reading
    /// them, the second init of a forward writing them; null without them.
    Value getStats() {
      if (readsStats())
        return getInputs()[3];
      return getInits().size() > 1 ? getInits()[1] : Value();
    }
    bool readsStats() { return getInputs().size() > 3; }
}];

def Nova_LayerNormKernelOp : Nova_Op<"layer_norm_kernel", [
    DestinationStyleOpInterface, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "nova.layer_norm(_grad) in destination style, for the kernels";
  let description = [{
    The forward (`inputs` = input, gamma, beta) or, with `backward`, the
    input gradient (`inputs` = input, gamma, grad), written into the first
    of `inits` (never read). A kernel root of its own: the target's codegen
    (nova-vectorize-rows on the CPU) expands it, rows split over workgroups.

    Row statistics (nova-share-row-statistics): a forward may take a
    second init, stats [..., 2], into which it writes each row's mean and
    rstd = 1 / sqrt(var + eps); an op taking them as a fourth input (a
    backward, or a later forward of the same input, such as the VJP's
    normalized input) reads them instead of two passes over the row.
  }];
  let arguments = (ins Variadic<AnyShaped>:$inputs, Variadic<AnyShaped>:$inits, F64Attr:$eps,
                       UnitAttr:$backward);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)` `outs` `(` $inits `:` type($inits) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = !strconcat([{
    MutableOperandRange getDpsInitsMutable() { return getInitsMutable(); }
    /// The result: y (forward) or the input's gradient (backward).
  }], rowStatsMethods, [{
    /// The row width d and the number of rows.
    int64_t width() { return cast<ShapedType>(getInit().getType()).getShape().back(); }
    int64_t rows() {
      return cast<ShapedType>(getInit().getType()).getNumElements() / std::max<int64_t>(1, width());
    }
  }]);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Nova_CrossEntropyOp : Nova_Op<"cross_entropy", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "softmax cross-entropy of each row of logits against its label";
  let description = [{
    Per row r of `logits` [..., C] with label y = labels[r] ([...]):
    result[r] = log(sum_c exp(x_c - max x)) + max x - x_y, the negative
    log-probability of class y. A label outside [0, C) makes the row's
    loss 0 and its gradient 0 (PyTorch's ignore_index). One op so the
    target runs it as one pass per row, never storing the log-softmax;
    its gradient is nova.cross_entropy_grad, which recomputes the row's
    max and sum instead of keeping them.
  }];
  let arguments = (ins Nova_FloatTensor:$logits, RankedTensorOf<[I32, I64]>:$labels);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` type($logits) `,` type($labels)";
}

def Nova_CrossEntropyGradOp : Nova_Op<"cross_entropy_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "d(logits) of nova.cross_entropy from d(result)";
  let description = [{
    Per row r: result[r, c] = (softmax(x_r)_c - [c == y]) grad[r], zero
    for a row whose label is outside [0, C).
  }];
  let arguments = (ins Nova_FloatTensor:$logits, RankedTensorOf<[I32, I64]>:$labels,
                       Nova_FloatTensor:$grad);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $labels `,` $grad attr-dict `:` type($logits) `,` type($labels) `,` type($grad)";
}

def Nova_CrossEntropyKernelOp : Nova_Op<"cross_entropy_kernel", [
    DestinationStyleOpInterface, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "nova.cross_entropy(_grad) in destination style, for the kernels";
  let description = [{
    The per-row losses (`inputs` = logits, labels; `inits` = losses [...])
    or, with `backward`, the logits' gradient (`inputs` = logits, labels,
    grad; `inits` = gradient [..., C]), written into the inits (never
    read). A kernel root of its own: the target's codegen
    (nova-vectorize-rows on the CPU) expands it, rows split over
    workgroups.

    Row statistics (nova-share-row-statistics): a forward may take a
    second init, stats [..., 2], into which it writes each row's max m
    and sum s of exp(x - m); a backward taking them as a fourth input
    reads them instead of two passes over the row recomputing them.
  }];
  let arguments = (ins Variadic<AnyShaped>:$inputs, Variadic<AnyShaped>:$inits, UnitAttr:$backward);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)` `outs` `(` $inits `:` type($inits) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = !strconcat([{
    MutableOperandRange getDpsInitsMutable() { return getInitsMutable(); }
    /// The losses (forward) or the logits' gradient (backward).
  }], rowStatsMethods, [{
    /// The row width C (the classes) and the number of rows.
    int64_t width() { return cast<ShapedType>(getInputs()[0].getType()).getShape().back(); }
    int64_t rows() {
      return cast<ShapedType>(getInputs()[0].getType()).getNumElements() / std::max<int64_t>(1, width());
    }
  }]);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Nova_CausalAttentionOp : Nova_Op<"causal_attention", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<NovaDifferentiableOpInterface>]> {
  let summary = "causal multi-head self-attention on a fused q|k|v projection";
  let description = [{
    `qkv` is [B, T, 3d]: columns [0, d) are q, [d, 2d) k, [2d, 3d) v; head h
    takes columns [h*hd, (h+1)*hd) of each (hd = d / heads). The result is
    [B, T, d], head h in its columns [h*hd, (h+1)*hd):

      out[b, i, h] = sum_{j <= i} softmax_j(scale * q[b, i, h] . k[b, j, h]) v[b, j, h]

    the same as slicing, permuting, `matmul(q, k^T) * scale + causal_mask`,
    softmax and `matmul(p, v)`, merged back. One op so the target can run it
    as one kernel per (batch, head) that never stores the T x T
    probabilities (the backward recomputes them) and never copies a
    permuted q, k or v.
  }];
  let arguments = (ins Nova_FloatTensor:$qkv, I64Attr:$heads, F64Attr:$scale);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$qkv attr-dict `:` type($qkv) `->` type($result)";
}

def Nova_CausalAttentionGradOp : Nova_Op<"causal_attention_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "the VJP of nova.causal_attention: d(qkv) from d(out)";
  let description = [{
    `grad` is the cotangent of nova.causal_attention's result [B, T, d]; the
    result is the cotangent of `qkv` [B, T, 3d] (dq | dk | dv). With
    P = softmax(scale q k^T + mask) and dP = grad v^T, per head:
      dv = P^T grad,  dS = P * (dP - rowsum(P * dP)),
      dq = scale dS k,  dk = scale dS^T q.
  }];
  let arguments = (ins Nova_FloatTensor:$qkv, Nova_FloatTensor:$grad, I64Attr:$heads,
                       F64Attr:$scale);
  let results = (outs Nova_FloatTensor:$result);
  let assemblyFormat = "$qkv `,` $grad attr-dict `:` type($qkv) `,` type($grad)";
  let hasVerifier = 1;
}

def Nova_AttentionKernelOp : Nova_Op<"attention_kernel", [
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "nova.causal_attention(_grad) in destination style, for the kernels";
  let description = [{
    What nova-lower-to-linalg makes of the two attention ops: the forward
    (`inputs` = qkv) or, with `backward`, the gradient (`inputs` = qkv, grad),
    written into `init`, which it never reads. On tensors it returns the
    result; after bufferization it writes its buffer. It is a kernel root of
    its own: the target's codegen (nova-vectorize-attention on the CPU)
    expands it, one workgroup per (batch, head).
  }];
  let arguments = (ins Variadic<AnyShaped>:$inputs, AnyShaped:$init, I64Attr:$heads,
                       F64Attr:$scale, UnitAttr:$backward);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)` `outs` `(` $init `:` type($init) `)`
    attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() { return getInitMutable(); }
    /// B, T, d (the result's width), heads, hd.
    int64_t batch() { return cast<ShapedType>(getInit().getType()).getDimSize(0); }
    int64_t seq() { return cast<ShapedType>(getInit().getType()).getDimSize(1); }
    int64_t model() {
      return cast<ShapedType>(getInputs()[0].getType()).getDimSize(2) / 3;
    }
    int64_t headDim() { return model() / getHeads(); }
  }];
}

//===----------------------------------------------------------------------===//
// Differentiation
//===----------------------------------------------------------------------===//

def Nova_GradientOp : Nova_Op<"gradient", [Pure, InferTypeOpAdaptor]> {
  let summary = "gradients of a scalar loss with respect to earlier values";
  let description = [{
    Stands for d`loss`/d`wrt[i]`, one result per `wrt` value, with its type.
    The nova-autodiff pass replaces it with the backward computation, built
    right before it from each op's NovaDifferentiable interface.
  }];
  let arguments = (ins Nova_FloatTensor:$loss, Variadic<Nova_AnyTensor>:$wrt);
  let results = (outs Variadic<Nova_AnyTensor>:$gradients);
  let assemblyFormat = "$loss `wrt` $wrt attr-dict `:` type($loss) `,` type($wrt)";
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Nova_ConstantOp : Nova_Op<"constant", [Pure]> {
  let summary = "a tensor whose elements all equal `value`";
  // Not ConstantLike: that trait makes the greedy rewriter unique constants
  // by their folded value, and without a folder every constant of a type
  // would collapse into one. CSE still merges equal constants.
  let arguments = (ins F64Attr:$value);
  let results = (outs Nova_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Data parallel
//===----------------------------------------------------------------------===//

def Nova_AllReduceOp : Nova_Op<"all_reduce", [
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "the sum of a value over the ranks of a data-parallel group";
  let description = [{
    Every rank runs the same step on its own batch; this is the elementwise
    sum over the ranks of `init` (a gradient), in place. The front end
    (nova::train_step with a communicator) puts one after each parameter's
    gradient and scales the sum by 1 / world size before the update. On
    tensors it returns the sum; after bufferization it reads and writes its
    buffer. nova-bucket-all-reduce groups these into buckets and replaces
    them by nova.all_reduce_start / nova.all_reduce_wait pairs placed in the
    launch plan.
  }];
  let arguments = (ins AnyShaped:$init);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    `outs` `(` $init `:` type($init) `)` attr-dict (`->` type($results)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() { return getInitMutable(); }
  }];
}

def Nova_AllReduceStartOp : Nova_Op<"all_reduce_start", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "start summing a bucket of buffers over the ranks";
  let description = [{
    In the launch plan, right after the launch that produces the last of
    the bucket's gradients: the runtime starts an in-place sum over the
    ranks of every buffer (whole, static, identity-layout allocations or step
    arguments), which runs while later launches do. Until the matching
    nova.all_reduce_wait no launch may touch them.

    `nova.all_reduce_start(%a, %b) {bucket = 0 : i64} : memref<256xf32>, memref<64x256xf32>`
  }];
  let arguments = (ins I64Attr:$bucket, Variadic<AnyMemRef>:$buffers);
  let assemblyFormat = "`(` $buffers `)` attr-dict `:` type($buffers)";
  let hasVerifier = 1;
}

def Nova_AllReduceWaitOp : Nova_Op<"all_reduce_wait", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "wait for a bucket's sum over the ranks";
  let description = [{
    Right before the first launch that reads a gradient of bucket `bucket`
    (its optimizer update): after it the buffers hold the sums.
  }];
  let arguments = (ins I64Attr:$bucket, Variadic<AnyMemRef>:$buffers);
  let assemblyFormat = "`(` $buffers `)` attr-dict `:` type($buffers)";
}

//===----------------------------------------------------------------------===//
// Launch plan
//===----------------------------------------------------------------------===//

def Nova_LaunchOp : Nova_Op<"launch", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "run a kernel over its workgroups on buffers of the step";
  let description = [{
    After nova-outline-kernels the step function is a launch plan: buffer
    allocations, `nova.launch` ops in order, and deallocations. Each launch
    names a kernel in the nested `module @kernels` by a nested symbol
    reference; the kernel takes the workgroup number (`index`) and then one
    memref per operand, of the same types. How many workgroups it runs is the
    kernel's `#nova.lowering_config`.

    `nova.launch @kernels::@k3(%arg0, %alloc) : memref<16x256xf32>, memref<16x256xf32>`
  }];
  let arguments = (ins SymbolRefAttr:$kernel, Variadic<AnyMemRef>:$buffers);
  let assemblyFormat = "$kernel `(` $buffers `)` attr-dict `:` type($buffers)";
}

#endif // NOVA_OPS
