// Who am I and where is the rendezvous: read from the launcher's environment.
#pragma once

#include <string>

#include "strata/locality.hpp"

namespace strata::detail {

struct LaunchInfo {
  int rank = -1;
  int size = 0;
  std::string root;    // host:port of the rendezvous store
  std::string source;  // which launcher's variables were used, for messages
};

// STRATA_RANK/STRATA_WORLD_SIZE/STRATA_ROOT, then torchrun (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), then Open MPI (OMPI_COMM_WORLD_RANK/_SIZE), then Slurm
// (SLURM_PROCID/SLURM_NTASKS). MPI and Slurm do not carry a rendezvous address, so those
// need STRATA_ROOT or MASTER_ADDR/MASTER_PORT as well. Throws InvalidArgument saying
// which variable is missing or malformed.
LaunchInfo discover_launch();

// A dedicated parameter server's place (STRATA_ROLE=server): rank is its index among the
// servers, size the number of workers, root as for a rank. Throws InvalidArgument naming
// what is missing or malformed.
LaunchInfo discover_server_launch();

// Whether STRATA_ROLE says this process is a dedicated server; InvalidArgument when it
// is neither worker nor server.
bool is_server_role();

// This process's locality from STRATA_REGION/_CLUSTER/_RACK/_HOST (host defaults to the
// hostname); local_rank is filled in later from everyone's records.
Locality local_locality();

}  // namespace strata::detail
