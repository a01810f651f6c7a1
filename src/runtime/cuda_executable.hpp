// cuda_executable.hpp - steps compiled for a CUDA GPU, run through the driver
// (cuda_executable.cpp). Internal to the runtime: load_executable() picks it
// for a description whose target is a GPU.
#pragma once

#include <memory>
#include <string>

#include "nova/executable_desc.hpp"

namespace nova {

/// Why this machine cannot run `desc` (a GPU description) through the CUDA
/// driver: no driver, no device, or a device lacking what the code needs;
/// "" if it can.
std::string cannot_run_on_cuda(const ExecutableDesc& desc);

/// The executable for `desc` on device 0. Throws nova::Error naming the
/// driver call that failed.
std::shared_ptr<Executable> load_cuda_executable(const ExecutableDesc& desc);

} // namespace nova
