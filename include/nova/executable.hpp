// executable.hpp - a compiled (or interpreted) step, as the runtime sees it.
//
// The contract between compiler and runtime: given contiguous inputs matching
// input_specs(), write every output into caller-allocated tensors matching
// output_specs(). Implementations live in the compiler library (the CPU JIT,
// the reference interpreter); the runtime never sees MLIR.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "nova/tensor.hpp"

namespace nova {

class Executable {
 public:
  /// `aliases[i]` is the input whose buffer output i is written into (an
  /// in-place update: parameters, optimizer state), or -1 for a fresh output.
  /// Empty means no output aliases an input.
  Executable(std::vector<TensorSpec> inputs, std::vector<TensorSpec> outputs,
             std::vector<int> aliases = {})
      : inputs_(std::move(inputs)), outputs_(std::move(outputs)), aliases_(std::move(aliases)) {
    aliases_.resize(outputs_.size(), -1);
  }
  virtual ~Executable() = default;

  const std::vector<TensorSpec>& input_specs() const { return inputs_; }
  const std::vector<TensorSpec>& output_specs() const { return outputs_; }
  const std::vector<int>& output_aliases() const { return aliases_; }
  /// "cpu-jit" or "interpreter".
  virtual std::string kind() const = 0;

  /// Runs the step. `inputs` are contiguous and match input_specs();
  /// `outputs` are contiguous, allocated and match output_specs(); an aliased
  /// output shares its input's buffer, which is updated in place.
  virtual void run(std::span<const Tensor> inputs, std::span<Tensor> outputs) const = 0;

  /// Allocates outputs (aliased ones are their inputs), checks inputs, runs.
  /// Throws ShapeError on a mismatch.
  std::vector<Tensor> operator()(std::span<const Tensor> inputs) const;

 private:
  std::vector<TensorSpec> inputs_;
  std::vector<TensorSpec> outputs_;
  std::vector<int> aliases_;
};

} // namespace nova
