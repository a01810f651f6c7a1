// profile.hpp - where a compiled step's time goes, kernel by kernel.
//
// With NOVA_PROFILE=1 (or =N: list the top N kernels) the runtime times every launch of every loaded
// executable (one clock read before and after each launch: cheap next to
// kernels, but not free; on a GPU, a CUDA event before each launch and after
// the last, the step launched kernel by kernel instead of as its CUDA graph)
// and, at process exit, prints the report to stderr:
// per executable, the time per run; per kernel class (the compiler's: matmul,
// attention, row kernels, elementwise, optimizer, embedding, data movement;
// from nova::named_scope and the kernel's structure), the share of the time; and the
// kernels that take the most, with GFLOP/s and GB/s from the work the
// compiler counted for each (executable_desc.hpp: KernelDesc::flops/bytes).
#pragma once

#include <string>

namespace nova {

/// True when NOVA_PROFILE is set (read once, when the first executable loads).
bool profiling_enabled();
/// The report so far ("" when profiling is off).
std::string profile_report(int top_kernels = 15);
/// Zeroes every counter (e.g. after a warm-up step).
void reset_profile();

} // namespace nova
