// gpu_target.hpp - one derivation of a GPU's TargetDesc, for the built-in
// table (target.cpp) and the live device (cuda_driver.cpp) alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nova/target.hpp"

namespace nova {

/// A CUDA GPU of `compute_capability` with `multiprocessors` SMs at
/// `clock_mhz`: chip, PTX version, features, per-SM limits and the peak rates
/// those imply (`half_rate_accumulate`: a GeForce card, whose tensor cores
/// accumulate in FP32 at half rate). The caller fills in L2, memory and DRAM
/// bandwidth.
TargetDesc gpu_target(int compute_capability, std::string name, std::string model, int multiprocessors,
                      int clock_mhz, bool half_rate_accumulate);

/// The GPU fields of `t`, in a fixed order (hashed and serialized).
std::vector<std::int64_t> gpu_fields(const TargetDesc& t);
/// Sets them from gpu_fields()'s list (missing trailing values: 0).
void set_gpu_fields(TargetDesc& t, const std::vector<std::int64_t>& values);

} // namespace nova
