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
  Executable(std::vector<TensorSpec> inputs, std::vector<TensorSpec> outputs)
      : inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}
  virtual ~Executable() = default;

  const std::vector<TensorSpec>& input_specs() const { return inputs_; }
  const std::vector<TensorSpec>& output_specs() const { return outputs_; }
  /// "cpu-jit" or "interpreter".
  virtual std::string kind() const = 0;

  /// Runs the step. `inputs` are contiguous and match input_specs();
  /// `outputs` are contiguous, allocated and match output_specs().
  virtual void run(std::span<const Tensor> inputs, std::span<Tensor> outputs) const = 0;

  /// Allocates outputs, checks inputs, runs. Throws ShapeError on a mismatch.
  std::vector<Tensor> operator()(std::span<const Tensor> inputs) const;

 private:
  std::vector<TensorSpec> inputs_;
  std::vector<TensorSpec> outputs_;
};

} // namespace nova
