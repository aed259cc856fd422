// The rank arithmetic behind every algorithm, simulated symbolically for p = 1..64:
// which contributions each rank holds after each step.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "collectives/patterns.hpp"

namespace strata::collectives {
namespace {

TEST(Pieces, CoverEverythingOnceForUnevenCounts) {
  for (std::size_t parts = 1; parts <= 64; ++parts)
    for (std::size_t n : {0ul, 1ul, 7ul, 63ul, 64ul, 65ul, 1000ul}) {
      std::size_t next = 0;
      for (std::size_t i = 0; i < parts; ++i) {
        ASSERT_EQ(piece_begin(n, parts, i), next);
        next += piece_size(n, parts, i);
        ASSERT_LE(piece_size(n, parts, i), piece_size(n, parts, 0));
      }
      ASSERT_EQ(next, n);
    }
}

TEST(ChunkCount, AtLeastOneAndBoundedByChunkBytes) {
  EXPECT_EQ(chunk_count(0, 4, 1024), 1u);
  EXPECT_EQ(chunk_count(256, 4, 1024), 1u);
  EXPECT_EQ(chunk_count(257, 4, 1024), 2u);
  EXPECT_EQ(chunk_count(10, 8, 1), 10u);  // chunk smaller than an element: one per element
}

// Simulates ring reduce-scatter: holds[r][s] = set of ranks whose contribution to
// segment s rank r has folded in.
void check_ring_reduce_scatter(int p, int shift) {
  std::vector<std::vector<std::set<int>>> holds(p, std::vector<std::set<int>>(p));
  for (int r = 0; r < p; ++r)
    for (int s = 0; s < p; ++s) holds[r][s] = {r};
  for (int k = 0; k < p - 1; ++k) {
    auto before = holds;
    for (int r = 0; r < p; ++r) {
      const int from = mod(r - 1, p);
      const int seg = ring_rs_recv_seg(r, shift, k, p);
      ASSERT_EQ(seg, ring_rs_send_seg(from, shift, k, p)) << "p=" << p << " k=" << k;
      holds[r][seg].insert(before[from][seg].begin(), before[from][seg].end());
    }
  }
  std::set<int> finals;
  for (int r = 0; r < p; ++r) {
    const int f = ring_rs_final_seg(r, shift, p);
    finals.insert(f);
    ASSERT_EQ(holds[r][f].size(), static_cast<std::size_t>(p)) << "p=" << p << " rank " << r;
  }
  ASSERT_EQ(finals.size(), static_cast<std::size_t>(p));
}

TEST(Ring, ReduceScatterCompletesEverySegmentOnce) {
  for (int p = 1; p <= 64; ++p) {
    check_ring_reduce_scatter(p, 0);
    check_ring_reduce_scatter(p, -1);
    for (int r = 0; r < p; ++r) ASSERT_EQ(ring_rs_final_seg(r, -1, p), r);
  }
}

TEST(Ring, AllgatherDeliversEverySegment) {
  for (int p = 1; p <= 64; ++p) {
    std::vector<std::set<int>> has(p);
    for (int r = 0; r < p; ++r) has[r] = {mod(r + 1, p)};  // own = me + 1, as after allreduce's RS
    for (int k = 0; k < p - 1; ++k)
      for (int r = 0; r < p; ++r) {
        const int from = mod(r - 1, p);
        const int seg = ring_ag_recv_seg(mod(r + 1, p), k, p);
        ASSERT_EQ(seg, ring_ag_send_seg(mod(from + 1, p), k, p));
        ASSERT_TRUE(has[from].count(seg)) << "p=" << p << ": forwarding a segment not yet held";
        has[r].insert(seg);
      }
    for (int r = 0; r < p; ++r) ASSERT_EQ(has[r].size(), static_cast<std::size_t>(p));
  }
}

TEST(Binomial, TreeSpansAllRanksWithConsistentParents) {
  for (int p = 1; p <= 64; ++p) {
    std::vector<int> parent_count(p, 0);
    for (int v = 0; v < p; ++v)
      for (int m = binomial_first_child_step(v); v + m < p; m <<= 1) {
        ASSERT_EQ(binomial_parent(v + m), v) << "p=" << p;
        ++parent_count[v + m];
      }
    EXPECT_EQ(binomial_parent(0), -1);
    for (int v = 1; v < p; ++v) ASSERT_EQ(parent_count[v], 1) << "p=" << p << " v=" << v;
  }
}

// Recursive doubling with folding, as in recursive_doubling.cpp.
TEST(RecursiveDoubling, EveryRankEndsWithAllContributions) {
  for (int p = 1; p <= 64; ++p) {
    const int p2 = pow2_floor(p), rem = p - p2;
    ASSERT_LE(p2, p);
    ASSERT_GT(2 * p2, p);
    std::vector<std::set<int>> acc(p);
    for (int r = 0; r < p; ++r) acc[r] = {r};
    std::vector<int> vr_of(p, -1), real_of(p2);
    for (int r = 0; r < p; ++r) {
      if (r < 2 * rem) {
        if (r % 2 == 1) {
          acc[r].insert(r - 1);
          vr_of[r] = r / 2;
        }
      } else {
        vr_of[r] = r - rem;
      }
      if (vr_of[r] >= 0) real_of[vr_of[r]] = r;
    }
    for (int mask = 1; mask < p2; mask <<= 1) {
      auto before = acc;
      for (int v = 0; v < p2; ++v) {
        const int pv = v ^ mask;
        const int partner = pv < rem ? 2 * pv + 1 : pv + rem;
        ASSERT_EQ(partner, real_of[pv]);
        acc[real_of[v]].insert(before[partner].begin(), before[partner].end());
      }
    }
    for (int r = 0; r < 2 * rem; r += 2) acc[r] = acc[r + 1];
    for (int r = 0; r < p; ++r) ASSERT_EQ(acc[r].size(), static_cast<std::size_t>(p)) << "p=" << p;
  }
}

}  // namespace
}  // namespace strata::collectives
