// The rank arithmetic behind every algorithm, simulated symbolically for p = 1..64:
// which contributions each rank holds after each step.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <set>
#include <vector>

#include "collectives/patterns.hpp"

namespace strata::collectives {
namespace {

TEST(PatternsPieces, CoverEverythingOnceForUnevenCounts) {
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

TEST(PatternsChunkCount, AtLeastOneAndBoundedByChunkBytes) {
  EXPECT_EQ(chunk_count(0, 4, 1024), 1u);
  EXPECT_EQ(chunk_count(256, 4, 1024), 1u);
  EXPECT_EQ(chunk_count(257, 4, 1024), 2u);
  EXPECT_EQ(chunk_count(10, 8, 1), 10u);  // chunk smaller than an element: one per element
}

// Simulates ring reduce-scatter: holds[r][s] has bit q set once rank r has folded rank
// q's contribution to segment s in (p <= 64, so one word per segment).
void check_ring_reduce_scatter(int p, int shift) {
  std::vector<std::vector<std::uint64_t>> holds(p, std::vector<std::uint64_t>(p));
  for (int r = 0; r < p; ++r)
    for (int s = 0; s < p; ++s) holds[r][s] = std::uint64_t{1} << r;
  for (int k = 0; k < p - 1; ++k) {
    auto before = holds;
    for (int r = 0; r < p; ++r) {
      const int from = mod(r - 1, p);
      const int seg = ring_rs_recv_seg(r, shift, k, p);
      ASSERT_EQ(seg, ring_rs_send_seg(from, shift, k, p)) << "p=" << p << " k=" << k;
      holds[r][seg] |= before[from][seg];
    }
  }
  std::set<int> finals;
  for (int r = 0; r < p; ++r) {
    const int f = ring_rs_final_seg(r, shift, p);
    finals.insert(f);
    ASSERT_EQ(std::popcount(holds[r][f]), p) << "p=" << p << " rank " << r;
  }
  ASSERT_EQ(finals.size(), static_cast<std::size_t>(p));
}

TEST(PatternsRing, ReduceScatterCompletesEverySegmentOnce) {
  for (int p = 1; p <= 64; ++p) {
    check_ring_reduce_scatter(p, 0);
    check_ring_reduce_scatter(p, -1);
    for (int r = 0; r < p; ++r) ASSERT_EQ(ring_rs_final_seg(r, -1, p), r);
  }
}

TEST(PatternsRing, AllgatherDeliversEverySegment) {
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

TEST(PatternsBinomial, TreeSpansAllRanksWithConsistentParents) {
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
TEST(PatternsRecursiveDoubling, EveryRankEndsWithAllContributions) {
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

TEST(PatternsFold, SurvivorsArePowerOfTwoAndSpeakForContiguousRanks) {
  for (int p = 1; p <= 64; ++p) {
    const int p2 = pow2_floor(p);
    int next = 0;
    for (int v = 0; v < p2; ++v) {
      ASSERT_EQ(fold_first(v, p), next) << "p=" << p;
      const int real = fold_real(v, p);
      ASSERT_EQ(fold_vrank(real, p), v) << "p=" << p;
      // The survivor is the last of the ranks it speaks for; the others sit out, paired with it.
      ASSERT_EQ(real, fold_first(v + 1, p) - 1);
      for (int r = fold_first(v, p); r < real; ++r) {
        ASSERT_EQ(fold_vrank(r, p), -1);
        ASSERT_EQ(fold_partner(r, p), real);
        ASSERT_EQ(fold_partner(real, p), r);
      }
      next = fold_first(v + 1, p);
      ASSERT_LE(next - fold_first(v, p), 2);
    }
    ASSERT_EQ(next, p);
  }
}

// Simulates halving-doubling on p2 virtual ranks: holds[v][b] = virtual ranks whose
// input for block b has been folded into v's copy.
TEST(PatternsHalvingDoubling, ReduceScatterOwnsEachBlockOnceAndAllgatherCoversAll) {
  for (int p = 1; p <= 64; ++p) {
    const int p2 = pow2_floor(p), steps = log2_floor(p2);
    ASSERT_EQ(1 << steps, p2);
    std::vector<std::vector<std::set<int>>> holds(p2, std::vector<std::set<int>>(p2));
    for (int v = 0; v < p2; ++v)
      for (int b = 0; b < p2; ++b) holds[v][b] = {v};
    std::vector<BlockRange> current(p2, BlockRange{0, p2});
    for (int k = 0; k < steps; ++k) {
      auto before = holds;
      for (int v = 0; v < p2; ++v) {
        const int w = halving_partner(v, k, p2);
        ASSERT_NE(w, v);
        ASSERT_EQ(halving_partner(w, k, p2), v) << "every send has its receive in the same round";
        const BlockRange keep = halving_keep(v, k, p2), give = halving_send(v, k, p2);
        ASSERT_EQ(give, halving_keep(w, k, p2));
        // keep and give split the current run in two halves; keep holds block v.
        ASSERT_EQ(std::min(keep.begin, give.begin), current[v].begin);
        ASSERT_EQ(std::max(keep.end, give.end), current[v].end);
        ASSERT_TRUE(keep.end == give.begin || give.end == keep.begin);
        ASSERT_TRUE(keep.begin <= v && v < keep.end);
        for (int b = keep.begin; b < keep.end; ++b)
          holds[v][b].insert(before[w][b].begin(), before[w][b].end());
        current[v] = keep;
      }
    }
    std::set<int> owned;
    for (int v = 0; v < p2; ++v) {
      ASSERT_EQ(current[v], (BlockRange{v, v + 1}));
      ASSERT_EQ(holds[v][v].size(), static_cast<std::size_t>(p2)) << "p=" << p << " v=" << v;
      owned.insert(v);
    }
    ASSERT_EQ(owned.size(), static_cast<std::size_t>(p2));
    // Allgather: has[v] = blocks v holds final values of.
    std::vector<std::set<int>> has(p2);
    for (int v = 0; v < p2; ++v) has[v] = {v};
    for (int j = 0; j < steps; ++j) {
      auto before = has;
      for (int v = 0; v < p2; ++v) {
        const int w = doubling_partner(v, j);
        ASSERT_EQ(doubling_partner(w, j), v);
        const BlockRange mine = doubling_held(v, j), theirs = doubling_held(w, j);
        for (int b = mine.begin; b < mine.end; ++b) ASSERT_TRUE(before[v].count(b)) << "sends a block it lacks";
        for (int b = theirs.begin; b < theirs.end; ++b) {
          ASSERT_TRUE(before[w].count(b));
          has[v].insert(b);
        }
      }
    }
    for (int v = 0; v < p2; ++v) ASSERT_EQ(has[v].size(), static_cast<std::size_t>(p2));
  }
}

struct TreeShape {
  int roots = 0;
  int depth = 0;
  std::vector<int> interior;  // group indices with children
};

// Checks one tree of the pair: parent and child links agree, at most two children, and
// every index reaches the root.
TreeShape check_tree(int t, int p) {
  TreeShape s;
  std::vector<int> parent_links(p, 0);
  for (int r = 0; r < p; ++r) {
    const int up = dtree_parent(r, t, p);
    if (up < 0) ++s.roots;
    int kids = 0;
    for (int c = 0; c < 2; ++c) {
      const int ch = dtree_child(r, t, c, p);
      if (ch < 0) continue;
      EXPECT_TRUE(ch >= 0 && ch < p);
      EXPECT_EQ(dtree_parent(ch, t, p), r) << "p=" << p << " t=" << t << " r=" << r;
      ++parent_links[ch];
      ++kids;
    }
    if (kids) s.interior.push_back(r);
    EXPECT_EQ(dtree_index(dtree_pos(r, t, p), t, p), r);
    int d = 0;
    for (int x = r; dtree_parent(x, t, p) >= 0 && d <= p; x = dtree_parent(x, t, p)) ++d;
    EXPECT_LE(d, p) << "cycle";
    s.depth = std::max(s.depth, d);
  }
  for (int r = 0; r < p; ++r) EXPECT_EQ(parent_links[r], dtree_parent(r, t, p) < 0 ? 0 : 1);
  return s;
}

TEST(PatternsDoubleTree, TwoSpanningTreesWithDisjointInteriors) {
  for (int p = 1; p <= 64; ++p) {
    const TreeShape a = check_tree(0, p), b = check_tree(1, p);
    ASSERT_EQ(a.roots, 1) << "p=" << p;
    ASSERT_EQ(b.roots, 1) << "p=" << p;
    // Depth log2 p, give or take the pulled-down right children.
    EXPECT_LE(a.depth, log2_floor(p) + 1) << "p=" << p;
    EXPECT_LE(b.depth, log2_floor(p) + 1) << "p=" << p;
    for (int r : a.interior)
      EXPECT_EQ(std::count(b.interior.begin(), b.interior.end(), r), 0) << "p=" << p << ": " << r << " forwards in both trees";
  }
}

TEST(PatternsDirect, EverySendMeetsItsReceiveInTheSameStep) {
  for (int p = 1; p <= 64; ++p)
    for (int me = 0; me < p; ++me) {
      std::set<int> to, from;
      for (int k = 1; k < p; ++k) {
        ASSERT_EQ(direct_from(direct_to(me, k, p), k, p), me);
        to.insert(direct_to(me, k, p));
        from.insert(direct_from(me, k, p));
      }
      ASSERT_EQ(to.size(), static_cast<std::size_t>(p - 1));
      ASSERT_EQ(from.size(), static_cast<std::size_t>(p - 1));
      ASSERT_FALSE(to.count(me));
    }
}

}  // namespace
}  // namespace strata::collectives
