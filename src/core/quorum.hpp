// Whether the ranks of a shrink may go on: never two sides of a partition at once.
//
// A shrink goes on with more than half of the communicator it shrinks. Ranks whose
// process is known gone (their host refuses a connection to their control port) cannot be
// another side, so they are not counted (a job of two whose other rank was killed goes
// on). Exactly half goes on only where the arbiter, a store outside every rank, names it:
// the lowest rank of each half claims the communicator there, the first claim wins, and
// every rank of both halves reads who won. Anything less stops with QuorumLostError,
// and so does a half that cannot reach the arbiter: a lost arbiter never lets two go on.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "strata/store.hpp"

namespace strata::detail {

struct QuorumCase {
  std::string who;               // "shrink on rank 3", for messages
  int size = 0;                  // ranks of the communicator being shrunk
  std::vector<int> members;      // its ranks that take part, ascending (they agreed on the list)
  std::vector<int> dead;         // excluded ranks every member found gone for certain
  int me = 0;                    // this rank, in the old numbering
  Store* arbiter = nullptr;      // none: an even split stops both halves
  std::string claim_key;         // the communicator's key at the arbiter
  std::chrono::steady_clock::time_point deadline;
};

// Returns when the members may go on; throws QuorumLostError naming what they lack.
void require_quorum(const QuorumCase& q);

// "{0, 3, 4}", and back (what does not parse is left out).
std::string rank_list(const std::vector<int>& ranks);
std::vector<int> parse_rank_list(const std::string& text);

}  // namespace strata::detail
