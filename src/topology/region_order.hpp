// The order in which a ring crosses regions, from the WAN matrix. A ring advances at the
// pace of its slowest hop, so with unequal region-to-region links the order decides
// whether the slow pairs are on it at all: the cheapest order is an asymmetric travelling
// salesman tour with the bottleneck as its length (PCCL orders its ring the same way).
//
// The tour is judged by the largest β of its hops (what a bandwidth-bound ring pays),
// then by the largest α and the sum of α (what a latency-bound one pays), then by the
// region names, so every rank that holds the same figures picks the same tour.
#pragma once

#include <string>
#include <vector>

#include "topology/cost_model.hpp"

namespace strata::topology {

struct RegionRing {
  std::vector<std::string> order;  // starts at the first region given; the last hop closes it
  LinkCost worst;                  // its slowest hop, in α and in β separately
  double alpha_sum = 0;            // α over all hops
};

// The ring over these regions in the given order (a ring of one region has no hops).
RegionRing ring_in_order(const Figures& f, const std::vector<std::string>& regions);

// The best ring over these regions by the rule above. Exact up to kExactRegions regions
// (every tour, the first region fixed); past that, nearest neighbour from the first region
// then 2-opt until no exchange of two hops improves it. Without a matrix, or with fewer
// than three regions, every order is the same ring: the given order comes back.
inline constexpr std::size_t kExactRegions = 9;
RegionRing best_ring(const Figures& f, const std::vector<std::string>& regions);

// "us -> ap -> eu -> us (slowest hop ap -> eu: 25.0 ms, 200 Mbit/s)", for strata-plan and logs.
std::string describe(const RegionRing& ring, const Figures& f);

}  // namespace strata::topology
