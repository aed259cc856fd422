// One rank of strata-nccl-perf: joins the NCCL communicator of the job and runs the
// sweep, printing nccl-tests' table on rank 0. Everything that touches CUDA or NCCL is
// behind this header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nccl_cases.hpp"

namespace strata::gpu_check {

struct SweepOptions {
  std::vector<Coll> colls{Coll::all_reduce};
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 32u << 20;
  std::uint64_t step_factor = 2;
  int iters = 20;
  int warmup = 5;
  // Above this size a row runs iters * scale_bytes / size timed calls (at least one), so
  // a sweep to 256 MiB fits a few minutes; 0 keeps iters at every size.
  std::uint64_t scale_bytes = 4u << 20;
  int device = 0;
  double timeout_s = 300;  // one call's (or init's) deadline
  std::string json_path;
  std::string label;  // names the run in the table's header and the JSON ("strata", "Socket")
};

// Whether this process sees a CUDA device; `why` says what it saw when not.
bool cuda_device_present(std::string& why);

// Rank `rank` of `nranks`; the NCCL unique id goes through `id_path` (rank 0 writes it).
// Returns the process's exit status: 0, or 1 when a result was wrong.
int run_nccl_rank(const SweepOptions& o, int rank, int nranks, const std::string& id_path);

}  // namespace strata::gpu_check
