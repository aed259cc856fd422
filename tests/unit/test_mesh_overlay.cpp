// The control mesh's overlay (bootstrap/mesh_overlay.hpp): links agreed by both ends,
// few of them, every rank a few hops from every other, survivors connected after losses,
// and flooded frames taken once whatever order they arrive in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <vector>

#include "bootstrap/mesh_overlay.hpp"

namespace strata::bootstrap {
namespace {

bool linked(int a, int b, int n, int full) {
  const auto nb = overlay_neighbours(a, n, full);
  return std::binary_search(nb.begin(), nb.end(), b);
}

// Hops from `from` to every rank over live ranks' links; -1 where it cannot reach.
std::vector<int> hops(int from, int n, int full, const std::vector<bool>& dead) {
  std::vector<int> d(static_cast<std::size_t>(n), -1);
  std::deque<int> q{from};
  d[static_cast<std::size_t>(from)] = 0;
  while (!q.empty()) {
    const int r = q.front();
    q.pop_front();
    for (int s : overlay_neighbours(r, n, full))
      if (!dead[static_cast<std::size_t>(s)] && d[static_cast<std::size_t>(s)] < 0) {
        d[static_cast<std::size_t>(s)] = d[static_cast<std::size_t>(r)] + 1;
        q.push_back(s);
      }
  }
  return d;
}

int floor_log2(int n) { return static_cast<int>(std::floor(std::log2(static_cast<double>(n)))); }

TEST(MeshOverlay, FullMeshUpToTheSetting) {
  EXPECT_TRUE(overlay_neighbours(0, 1, 16).empty());
  EXPECT_EQ(overlay_neighbours(2, 5, 16), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(overlay_neighbours(0, 16, 16).size(), 15u);
  EXPECT_EQ(overlay_neighbours(0, 17, 16).size(), 8u);  // ±1, ±2, ±4, ±8
  EXPECT_TRUE(overlay_neighbours(-1, 8, 0).empty());
  EXPECT_TRUE(overlay_neighbours(8, 8, 0).empty());
}

TEST(MeshOverlay, LinksAreSymmetricFewAndIncludeTheRing) {
  for (int n : {2, 3, 5, 8, 17, 24, 100, 255, 256, 257, 1000, 4096}) {
    for (int r = 0; r < n; r += std::max(1, n / 37)) {
      const auto nb = overlay_neighbours(r, n, 0);
      EXPECT_LE(static_cast<int>(nb.size()), 2 * floor_log2(n) + 2) << n;
      EXPECT_TRUE(std::is_sorted(nb.begin(), nb.end()));
      EXPECT_EQ(std::count(nb.begin(), nb.end(), r), 0);
      EXPECT_TRUE(linked(r, (r + 1) % n, n, 0)) << r << " of " << n;
      EXPECT_TRUE(linked(r, (r + n - 1) % n, n, 0)) << r << " of " << n;
      for (int s : nb) {
        EXPECT_TRUE(linked(s, r, n, 0)) << r << "-" << s << " of " << n;
      }
    }
  }
}

TEST(MeshOverlay, EveryRankIsWithinLog2NHops) {
  for (int n : {17, 100, 256, 1000, 4096}) {
    const std::vector<bool> none(static_cast<std::size_t>(n));
    for (int r : {0, n / 3, n - 1}) {
      const auto d = hops(r, n, 0, none);
      EXPECT_LE(*std::max_element(d.begin(), d.end()), floor_log2(n)) << n;
      EXPECT_EQ(std::count(d.begin(), d.end(), -1), 0);
    }
  }
}

// A tenth of the ranks dead at random, 20 times over: the rest still reach each other.
TEST(MeshOverlay, SurvivorsStayConnectedAfterManyLosses) {
  std::mt19937 rng(7);
  for (int n : {40, 300, 2000}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<bool> dead(static_cast<std::size_t>(n));
      for (int k = 0; k < n / 10; ++k) dead[rng() % static_cast<unsigned>(n)] = true;
      int from = 0;
      while (dead[static_cast<std::size_t>(from)]) ++from;
      const auto d = hops(from, n, 0, dead);
      for (int r = 0; r < n; ++r) {
        if (!dead[static_cast<std::size_t>(r)]) {
          EXPECT_GE(d[static_cast<std::size_t>(r)], 0) << r << " of " << n;
        }
      }
    }
  }
}

// What the header promises for partitions into runs of ranks.
TEST(MeshOverlay, EveryRunLongerThanAQuarterHoldsANeighbourOfEachOtherRank) {
  for (int n : {17, 24, 33, 48, 64, 96, 100, 257, 384}) {
    const int len = n / 4 + 1;
    for (int start = 0; start < n; ++start) {
      for (int r = 0; r < n; ++r) {
        if ((r - start + n) % n < len) continue;  // inside the run
        const auto nb = overlay_neighbours(r, n, 0);
        const bool inside =
            std::any_of(nb.begin(), nb.end(), [&](int s) { return (s - start + n) % n < len; });
        EXPECT_TRUE(inside) << "rank " << r << " of " << n << ", run from " << start;
      }
    }
  }
}

TEST(FloodSeen, TakesEachFrameOnceInAnyOrder) {
  FloodSeen seen(3);
  EXPECT_TRUE(seen.first(1, 2));
  EXPECT_TRUE(seen.first(1, 1));
  EXPECT_FALSE(seen.first(1, 2));
  EXPECT_FALSE(seen.first(1, 1));
  EXPECT_TRUE(seen.first(1, 5));
  EXPECT_TRUE(seen.first(1, 3));
  EXPECT_TRUE(seen.first(1, 4));
  EXPECT_FALSE(seen.first(1, 5));
  EXPECT_TRUE(seen.first(2, 1));  // origins apart
  EXPECT_TRUE(seen.first(0, 1));
  EXPECT_FALSE(seen.first(3, 1));   // no such origin
  EXPECT_FALSE(seen.first(-1, 1));
  EXPECT_FALSE(seen.first(0, 0));   // numbers start at 1
}

}  // namespace
}  // namespace strata::bootstrap
