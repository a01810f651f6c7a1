// cuda.hpp - is there a CUDA GPU, and what is it.
//
// The CUDA driver (libcuda.so.1) is loaded at run time, never linked: a
// binary built with GPU support starts on a machine without a GPU, and these
// calls say why none can be used instead of failing to load.
//
// Environment:
//   NOVA_CUDA_DRIVER=<path>  load this driver library instead of libcuda.so.1
//                            (tests use a fake one)
#pragma once

#include <string>

#include "nova/target.hpp"

namespace nova {

/// True when the driver loads, initializes and reports at least one device;
/// otherwise `why` (when given) says which of those failed.
bool cuda_available(std::string* why = nullptr);

/// Devices the driver reports (0 without a driver).
int cuda_device_count();

/// The live device `ordinal`, described from the driver's attributes (its
/// compute capability, multiprocessors, shared memory, registers, clocks, L2
/// and memory); the peak rates follow from those as for the built-in entries.
/// Throws nova::Error saying why when there is no such GPU.
TargetDesc cuda_device_target(int ordinal = 0);

} // namespace nova
