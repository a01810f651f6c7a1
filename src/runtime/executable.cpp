// executable.cpp - the checks every executable shares before it runs.
//
// Besides shapes: an input that an output overwrites in place (a donated
// parameter or optimizer state) must not share memory with any other input.
// Compiled kernels assume their buffers do not overlap where one is written
// (they are told so, which is what lets them vectorize without run-time
// checks), so such a call is refused rather than computed wrongly.
#include "nova/executable.hpp"

#include <algorithm>

#include "storage.hpp"

namespace nova {

namespace {
/// The line naming the step's source, or nothing when the caller has none.
std::string step_line(std::string_view declared_at) {
  return declared_at.empty() ? std::string() : "\n  the step is declared at " + std::string(declared_at);
}
} // namespace

std::vector<Tensor> Executable::operator()(std::span<const Tensor> inputs,
                                           std::string_view declared_at) const {
  if (inputs.size() != inputs_.size())
    throw ShapeError("nova: the step takes " + std::to_string(inputs_.size()) + " tensors, got " +
                     std::to_string(inputs.size()) + step_line(declared_at));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].spec() != inputs_[i])
      throw ShapeError("nova: argument " + std::to_string(i) + " is " + to_string(inputs[i].spec()) +
                       " but the step was compiled for " + to_string(inputs_[i]) +
                       step_line(declared_at));
    if (!inputs[i].is_contiguous())
      throw ShapeError("nova: argument " + std::to_string(i) + " is not contiguous" +
                       step_line(declared_at));
  }
  check_donated_inputs_are_unshared(inputs, declared_at);
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

void Executable::check_donated_inputs_are_unshared(std::span<const Tensor> inputs,
                                                   std::string_view declared_at) const {
  if (std::none_of(aliases_.begin(), aliases_.end(), [](int a) { return a >= 0; })) return;
  struct Range {
    const std::byte* begin;
    const std::byte* end;
    std::size_t input;
  };
  std::vector<Range> ranges;
  ranges.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    // Addresses only: a GPU step's newer bytes stay where they are.
    const std::byte* p = detail::TensorAccess::address(inputs[i]);
    std::size_t bytes = static_cast<std::size_t>(inputs[i].numel()) * size_of(inputs[i].dtype());
    if (bytes > 0) ranges.push_back({p, p + bytes, i});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<bool> donated(inputs.size(), false);
  for (int a : aliases_)
    if (a >= 0) donated[static_cast<std::size_t>(a)] = true;
  // After sorting, any overlap shows between a range and one that starts
  // before the furthest end seen so far.
  const Range* furthest = nullptr;
  for (const Range& r : ranges) {
    if (furthest && r.begin < furthest->end && (donated[r.input] || donated[furthest->input]))
      throw ShapeError("nova: argument " + std::to_string(std::min(r.input, furthest->input)) +
                       " and argument " + std::to_string(std::max(r.input, furthest->input)) +
                       " share memory, and one of them is updated in place by the step; pass "
                       "distinct tensors (clone() one of them)" +
                       step_line(declared_at));
    if (!furthest || r.end > furthest->end) furthest = &r;
  }
}

} // namespace nova
