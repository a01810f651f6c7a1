// mpi.hpp - data-parallel groups of processes over MPI (Open MPI), from the
// separate library Nova::nova_mpi, so that nothing else links MPI.
//
//   mpirun -np 2 build/examples/gpt_train --data-parallel ...
//
//   nova::dist::set_communicator(nova::dist::mpi_world(&argc, &argv));
//   auto step = nova::train_step(loss, params, opt);   // each rank its batch
//
// Each rank sums gradients with MPI's non-blocking all-reduce, started and
// waited for where the compiled step's plan says; between its launches the
// runtime lets MPI progress them (Communicator::progress). Every wait is
// bounded by NOVA_DIST_TIMEOUT_S: a rank that hangs makes the others fail
// with a DistError naming the collective, never hang; at exit such a process
// ends the whole job (MPI_Abort) instead of finalizing, which would wait for
// the hung peer. A rank that dies is noticed by mpirun, which ends the others.
#pragma once

#include <memory>

#include "nova/distributed.hpp"

namespace nova::dist {

/// True when this process was started by an MPI launcher (mpirun sets
/// OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK).
bool launched_by_mpi();

/// MPI_COMM_WORLD as a data-parallel group (rank and size from MPI).
/// Unless NOVA_NUM_THREADS is set, each rank then runs its share of the
/// node's cores (cores / ranks on the node), as steps are compiled for it.
/// Initializes MPI on the first call (MPI_THREAD_SERIALIZED: the step may
/// run on any one thread at a time) and finalizes it at exit; later calls
/// return the same communicator. Throws DistError if MPI cannot start.
std::shared_ptr<Communicator> mpi_world(int* argc = nullptr, char*** argv = nullptr);

} // namespace nova::dist
