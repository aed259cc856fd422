// Which ranks of the control mesh hold a connection, and how a frame meant for every rank
// reaches those that hold none with its sender.
//
// Up to a size (STRATA_MESH_FULL_UPTO) every pair is connected. Beyond it rank r is
// connected to r ± 2^k (mod N) for every k with 2^k <= N/2, and to r ± ⌊N/2⌋: at most
// 2⌊log2 N⌋ + 2 links a rank, the same on both sides of each link (r + d's rank − d is
// r), ring neighbours among them, and every rank within ⌊log2 N⌋ hops of every other
// (write the distance, at most N/2, in binary). A frame for everyone is flooded: each rank passes a frame it sees for the
// first time to its other links. The ring keeps the survivors connected whatever single
// rank dies, and the chords keep them so under many more: cutting a rank off takes all
// of its neighbours. And every run of more than N/4 consecutive ranks holds a
// neighbour of each rank outside it, so when a partition cuts the job into runs of ranks
// (regions are such runs), every rank on the larger side of it is watched from across it
// and a loss is named on that side for each rank it cannot reach.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace strata::bootstrap {

// The ranks `rank` holds a connection with, ascending; every other rank when
// size <= full_upto.
std::vector<int> overlay_neighbours(int rank, int size, int full_upto);

// Which flooded frames this rank has already seen, by origin and the origin's number
// (1, 2, ... per origin); arrivals along different paths may come in any order.
class FloodSeen {
 public:
  explicit FloodSeen(int size) : per_origin_(static_cast<std::size_t>(size)) {}
  // True the first time (origin, seq) is offered; false for an origin out of range.
  bool first(int origin, std::uint64_t seq);

 private:
  struct Origin {
    std::uint64_t upto = 0;         // 1..upto all seen
    std::set<std::uint64_t> above;  // seen beyond upto
  };
  std::vector<Origin> per_origin_;
};

}  // namespace strata::bootstrap
