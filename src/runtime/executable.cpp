// executable.cpp - the checks every executable shares before it runs.
#include "nova/executable.hpp"

namespace nova {

std::vector<Tensor> Executable::operator()(std::span<const Tensor> inputs) const {
  if (inputs.size() != inputs_.size())
    throw ShapeError("nova: the step takes " + std::to_string(inputs_.size()) + " tensors, got " +
                     std::to_string(inputs.size()));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].spec() != inputs_[i])
      throw ShapeError("nova: argument " + std::to_string(i) + " is " + to_string(inputs[i].spec()) +
                       " but the step was compiled for " + to_string(inputs_[i]));
    if (!inputs[i].is_contiguous())
      throw ShapeError("nova: argument " + std::to_string(i) + " is not contiguous");
  }
  std::vector<Tensor> outputs;
  outputs.reserve(outputs_.size());
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    int alias = aliases_[i];
    outputs.push_back(alias >= 0 ? inputs[static_cast<std::size_t>(alias)]
                                 : Tensor::empty(outputs_[i].shape, outputs_[i].dtype));
  }
  run(inputs, outputs);
  return outputs;
}

} // namespace nova
