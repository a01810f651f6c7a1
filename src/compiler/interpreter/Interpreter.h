//===- Interpreter.h - the float64 reference evaluator of nova IR -*- C++ -*-===//
//
// Evaluates a nova-dialect function op by op in double precision. It is the
// oracle every numerical test compares compiled code with, and the engine
// behind NOVA_INTERPRET=1. Its per-op code is the specification of each op.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_INTERPRETER_INTERPRETER_H
#define NOVA_COMPILER_INTERPRETER_INTERPRETER_H

#include "nova/executable.hpp"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace mlir::nova {

/// A dense row-major array of doubles.
struct NDArray {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

/// Monte Carlo arithmetic (Parker, 1997): every element of every floating
/// result of an op that rounds (not a copy, a comparison, a maximum, a
/// ReLU, a negation) moved by r times its size, r uniform in [-relative,
/// relative], drawn by Philox from `seed`, the op's position and the
/// element's index; its size is its magnitude, or for an op that sums
/// terms (a reduction's sum or mean, a product, a scatter-add, attention's
/// weighted sum of values) the sum of its terms' magnitudes, plus for a
/// reduction, a product or a scatter-add its running sums' spread,
/// sqrt(sum_k S_k^2) of the partial sums in order (the accumulation's own
/// rounding: for n terms of one sign about sqrt(n / 3) times the sum). With
/// `relative` float32's unit roundoff, how far the outputs move is about
/// how far float32's rounding can move them, cancellations included (a
/// gradient that is 0 but for cancelling terms moves by their size, where
/// one float32 run may happen to cancel them exactly). The other composite
/// ops (softmax, LayerNorm, cross-entropy, their gradients and attention's)
/// are moved as whole results, not term by term, and the sums inside them
/// (a LayerNorm's mean and variance, its gradient's two sums, a softmax's
/// or cross-entropy's sum of exponentials; not attention's) by their own
/// spread, drawn for each row, before the result is formed from them: an
/// error in a row's mean shifts all its elements alike. 0: the exact
/// reference.
///
/// `perOp`: one draw for all of an op's elements. Independent draws add the
/// roundings of many elements with random signs, but identical
/// computations round identically: a sum of many elements that are 0 but
/// for the same rounding (a broadcast's gradient over identical log-softmax
/// columns) grows with their count, not its square root. One draw an op
/// moves them together, as that rounding does; and a reduction's,
/// product's or scatter-add's running sum's roundings then count all of one
/// sign, sum_k |S_k| (a sum of one value repeated rounds alike at every
/// step: n / 2 times the sum for n terms).
struct RoundingNoise {
  double relative = 0;
  std::uint64_t seed = 0;
  bool perOp = false;
  /// The roundoff of a product's operands where they are rounded below
  /// float32's (bf16 2^-8, tf32 2^-10 truncated: the step's matmul
  /// precision on tensor cores; the interpreter executable takes it from
  /// the module's nova.matmul_precision): a product's terms move by up to
  /// twice that; attention's operands, probabilities and score gradients
  /// (what its products read) each by up to that.
  double productRelative = 0;
};

/// Runs `func` on `inputs`; fails (with a diagnostic on the op) on an op it
/// does not know.
FailureOr<std::vector<NDArray>> interpret(func::FuncOp func,
                                          const std::vector<NDArray> &inputs,
                                          const RoundingNoise &noise = {});

/// An executable that interprets `module`'s function `funcName`; it owns the
/// module.
std::shared_ptr<::nova::Executable>
makeInterpreterExecutable(OwningOpRef<ModuleOp> module, const std::string &funcName,
                          std::vector<::nova::TensorSpec> inputs,
                          std::vector<::nova::TensorSpec> outputs,
                          std::vector<int> aliases);

} // namespace mlir::nova

#endif // NOVA_COMPILER_INTERPRETER_INTERPRETER_H
