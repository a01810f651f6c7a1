// cuda.hpp - is there a CUDA GPU, and what is it.
//
// The CUDA driver (libcuda.so.1) is loaded at run time, never linked: a
// binary built with GPU support starts on a machine without a GPU, and these
// calls say why none can be used instead of failing to load.
//
// Environment:
//   NOVA_CUDA_DRIVER=<path>  load this driver library instead of libcuda.so.1
//                            (tests use a fake one)
//   NOVA_CUDA_DEVICE=<n>     the GPU this process's steps run on (default:
//                            its local rank, see cuda_device())
#pragma once

#include <string>

#include "nova/target.hpp"

namespace nova {

/// True when the driver loads, initializes and reports at least one device;
/// otherwise `why` (when given) says which of those failed.
bool cuda_available(std::string* why = nullptr);

/// Devices the driver reports (0 without a driver).
int cuda_device_count();

/// The GPU this process's steps run on: NOVA_CUDA_DEVICE; else the
/// process's rank on its node as its launcher gives it (mpirun's
/// OMPI_COMM_WORLD_LOCAL_RANK or MPI_LOCALRANKID, srun's SLURM_LOCALID,
/// torchrun's LOCAL_RANK), so the ranks of a data-parallel job on one node
/// take a GPU each (a process that sees one GPU, as a launcher that binds
/// each rank to its own makes it, uses that one); else 0. Throws
/// nova::Error naming the variable when it is not a device the driver
/// reports.
int cuda_device();

/// The live device `ordinal` (-1: cuda_device()), described from the
/// driver's attributes (its compute capability, multiprocessors, shared
/// memory, registers, clocks, L2 and memory); the peak rates follow from
/// those as for the built-in entries. Throws nova::Error saying why when
/// there is no such GPU.
TargetDesc cuda_device_target(int ordinal = -1);

} // namespace nova
