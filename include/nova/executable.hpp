// executable.hpp - a compiled (or interpreted) step, as the runtime sees it.
//
// Given contiguous inputs matching input_specs(), write every output into
// caller-allocated tensors matching output_specs(). Compiled steps are loaded
// by the runtime from an executable description (executable_desc.hpp); the
// float64 reference interpreter lives in the compiler library. The runtime
// never sees MLIR.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nova/tensor.hpp"

namespace nova {

struct ExecutableDesc;

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
  /// "cpu" (a loaded executable description) or "interpreter".
  virtual std::string kind() const = 0;
  /// The description it was loaded from (what the disk cache and ahead-of-time
  /// builds store), or null for the interpreter.
  virtual const ExecutableDesc* description() const { return nullptr; }
  /// Whether another process loading description() runs this same program
  /// (what a data-parallel group shares from rank 0). Not the interpreter
  /// (no description) nor the GPU emulator (it needs the compiler's IR).
  virtual bool shareable() const { return description() != nullptr; }

  /// Runs the step. `inputs` are contiguous and match input_specs();
  /// `outputs` are contiguous, allocated and match output_specs(); an aliased
  /// output shares its input's buffer, which is updated in place.
  virtual void run(std::span<const Tensor> inputs, std::span<Tensor> outputs) const = 0;

  /// Allocates outputs (aliased ones are their inputs), checks inputs, runs.
  /// Throws ShapeError on a mismatch, or when an input that is updated in
  /// place shares memory with another input; `declared_at` ("file:line" of
  /// the step's declaration, from jit / train_step) is named in the message.
  std::vector<Tensor> operator()(std::span<const Tensor> inputs,
                                 std::string_view declared_at = {}) const;

 private:
  void check_donated_inputs_are_unshared(std::span<const Tensor> inputs,
                                         std::string_view declared_at) const;

  std::vector<TensorSpec> inputs_;
  std::vector<TensorSpec> outputs_;
  std::vector<int> aliases_;
};

} // namespace nova
