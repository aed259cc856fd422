// strata-perf's command line: nccl-tests' flags with the same meanings and defaults,
// plus the ones that choose how ranks are started and connected.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/types.hpp"

#include "strata/compression.hpp"

namespace strata::perf {

enum class Collective { all_reduce, reduce_scatter, all_gather, broadcast, reduce, sendrecv, alltoall, barrier };

// nccl-tests' name ("all_reduce", ...), also the name bus_bw_factor expects.
const char* collective_name(Collective c);
// Accepts the nccl-tests names and strata's spellings (allreduce, allgather, bcast, ...).
std::optional<Collective> parse_collective(const std::string& name);
bool reduces(Collective c);  // takes a reduction op (redop column is not "none")
bool rooted(Collective c);   // takes a root (root column is not -1)

struct PerfOptions {
  std::uint64_t min_bytes = 32ull << 20;
  std::uint64_t max_bytes = 32ull << 20;
  std::uint64_t step_bytes = 1ull << 20;
  std::uint64_t step_factor = 1;
  int iters = 20;
  int warmup_iters = 1;
  int check = 1;
  int blocking = 0;
  bool median = false;  // time each iteration (waiting after each) and report the median
  Collective collective = Collective::all_reduce;
  std::vector<DataType> dtypes;  // one, or every type for "-d all"
  std::vector<ReduceOp> ops;     // one, or every op for "-o all"
  std::string dtype_arg = "float";
  std::string op_arg = "sum";
  int root = 0;
  bool all_roots = false;  // "-r all"
  std::optional<int> ranks;
  int regions = 1;          // spawned ranks are split into this many fake regions
  int servers = 0;          // dedicated parameter servers spawned with the ranks
  bool interleave = false;  // region of rank r is r % regions instead of blocks in rank order
  std::string transport;  // "", "ucx" or "tcp"
  std::string json_path;
  double timeout_s = 0;
  // all_reduce of float with sum or avg only: every call compressed (error feedback on),
  // and the check reports the relative error of one call instead of #wrong.
  std::optional<Compression> compress;
  // --algo: a registered algorithm forced on every timed call (CallOptions::algorithm),
  // "all" for one sweep per algorithm that implements the collective, "" for automatic.
  std::string algo;
  // With several algorithms: every one at a size before the next size (not one whole sweep
  // after another), so drift in the host's load over the run hits them alike.
  bool by_size = false;
};

// The collective strata runs for c; nullopt for sendrecv (point to point).
std::optional<CollectiveKind> collective_kind(Collective c);
// What can run a collective on elements of a type here (Communicator::algorithms).
using AvailableAlgorithms = std::function<std::vector<std::string>(CollectiveKind, DataType)>;
// The algorithms to sweep, in registry order: {""} without --algo, else the one named, or
// with "all" every available one that implements the collective for all of o's types.
std::vector<std::string> algorithms_to_run(const PerfOptions& o, const AvailableAlgorithms& available);

struct ParsedOptions {
  std::optional<PerfOptions> options;  // empty: exit with exit_code (help, or a bad flag)
  int exit_code = 0;
};

// Parses argv; prints CLI11's help or error message itself.
ParsedOptions parse_perf_options(int argc, char** argv);

}  // namespace strata::perf
