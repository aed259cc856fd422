// The per-rank half of the multiprocess correctness checks: a list of collective cases
// and a runner that executes one on a live communicator and compares it with the
// reference computed from every rank's inputs (and checks all ranks hold equal bits).
#pragma once

#include <string>
#include <vector>

#include "strata/strata.hpp"

namespace strata::test {

struct Case {
  CollectiveKind kind;
  DataType dt;
  ReduceOp op;
  std::size_t count;
  int root;
  bool in_place;
  std::string name() const;
};

// Every collective x dtype x op over sizes {0, 1, 7, 1000+p, 20011}, alternating in and out
// of place; `large` adds a few cases of a million elements and more.
std::vector<Case> cases(int p, bool large);
// Only allreduce cases.
std::vector<Case> allreduce_cases(int p, bool large);
// Where the buffers of the collective under test live: host memory, or host memory
// passed off as a device's (device::emulate), which takes the GPU path's staging.
enum class Memory { host, emulated_device };

// "" on success, else a description of what was wrong. `o` applies to the collective
// under test only (e.g. CallOptions::algorithm), not to the checks around it.
std::string run_case(Communicator& comm, const Case& c, std::uint64_t case_id, const CallOptions& o = {},
                     Memory memory = Memory::host);
// send/recv around the ring at several sizes, then barriers; throws on corruption.
void p2p_and_barrier(Communicator& comm);
// Every rank in turn receives two messages from each other rank from any source (and one
// from a named peer while such a receive is unmatched): right bytes, per-sender order.
void check_any_source(Communicator& comm);
// Barriers with one rank arriving 30 ms late in each round: throws if any rank leaves
// before the late one entered.
void check_barrier(Communicator& comm, const CallOptions& o = {});
// Runs every case; throws listing the first failures.
void run_all(Communicator& comm, const std::vector<Case>& all, const CallOptions& o = {},
             Memory memory = Memory::host);

}  // namespace strata::test
