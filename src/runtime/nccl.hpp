// nccl.hpp - NCCL, resolved from libnccl.so.2 at run time (dlopen), as the
// CUDA driver is: nothing links it, a binary without it starts, and a
// data-parallel GPU step says clearly when it is missing. Only the calls
// Nova makes, with NCCL's types written out (test_gpu_target checks them
// against nccl.h where the toolkit has it).
#pragma once

#include <cstddef>
#include <string>

#include "cuda_driver.hpp"

namespace nova::nccl {

using ncclResult = int;
using ncclComm = void*;
/// ncclUniqueId: 128 opaque bytes, passed by value to ncclCommInitRank.
struct UniqueId {
  char internal[128];
};

/// ncclDataType_t and ncclRedOp_t values (nccl.h).
inline constexpr int kFloat32 = 7;
inline constexpr int kFloat64 = 8;
inline constexpr int kSum = 0;

struct Library {
  ncclResult (*ncclGetUniqueId)(UniqueId* id) = nullptr;
  ncclResult (*ncclCommInitRank)(ncclComm* comm, int nranks, UniqueId id, int rank) = nullptr;
  ncclResult (*ncclCommDestroy)(ncclComm comm) = nullptr;
  ncclResult (*ncclAllReduce)(const void* send, void* recv, std::size_t count, int dtype, int op, ncclComm comm,
                              cuda::CUstream stream) = nullptr;
  ncclResult (*ncclGroupStart)() = nullptr;
  ncclResult (*ncclGroupEnd)() = nullptr;
  const char* (*ncclGetErrorString)(ncclResult result) = nullptr;
};

/// NCCL, loaded once per process (NOVA_NCCL_LIBRARY may name another
/// library); nullptr when it cannot be, with the reason in `why`.
const Library* library(std::string* why = nullptr);

/// "ncclCommInitRank: unhandled cuda error (1)"
std::string describe_error(const Library& l, const char* call, ncclResult r);

} // namespace nova::nccl
