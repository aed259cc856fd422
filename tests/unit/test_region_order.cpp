// The order a ring crosses regions in (topology/region_order.hpp): it avoids a slow pair
// of regions, honours asymmetric links, finds a hidden fast tour past the exact search's
// size, and the plan and the selector follow it (hierarchy::order_regions).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/registry.hpp"
#include "hierarchy/plan.hpp"
#include "topology/region_order.hpp"
#include "topology/selector.hpp"

namespace strata::topology {
namespace {

constexpr double kFast = 8 / 200e6, kSlow = 8 / 50e6;  // s/B at 200 and 50 Mbit/s

// Every ordered pair at 25 ms and `beta(from, to)`.
template <class F>
Figures matrix(const std::vector<std::string>& regions, F beta) {
  Figures f = default_figures();
  f.regions = regions;
  for (std::size_t i = 0; i < regions.size(); ++i)
    for (std::size_t j = 0; j < regions.size(); ++j)
      f.wan.push_back(LinkFigure{{0.025, i == j ? 0 : beta(i, j), 20e-6}, Source::file});
  return f;
}

std::vector<std::string> names(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("r" + std::to_string(i));
  return out;
}

bool uses(const RegionRing& r, const std::string& a, const std::string& b) {
  for (std::size_t k = 0; k < r.order.size(); ++k) {
    const auto& x = r.order[k];
    const auto& y = r.order[(k + 1) % r.order.size()];
    if ((x == a && y == b) || (x == b && y == a)) return true;
  }
  return false;
}

TEST(RegionOrder, AvoidsTheSlowPair) {
  // r0 - r1 at 50 Mbit/s both ways, 200 elsewhere: rank order r0 r1 r2 r3 crosses it.
  const auto regions = names(4);
  const Figures f = matrix(regions, [](std::size_t i, std::size_t j) { return i + j == 1 ? kSlow : kFast; });
  EXPECT_DOUBLE_EQ(ring_in_order(f, regions).worst.beta, kSlow);
  const RegionRing best = best_ring(f, regions);
  EXPECT_EQ(best.order.front(), "r0");
  EXPECT_FALSE(uses(best, "r0", "r1")) << describe(best, f);
  EXPECT_DOUBLE_EQ(best.worst.beta, kFast);
  EXPECT_DOUBLE_EQ(best.alpha_sum, 4 * 0.025);
  EXPECT_NE(describe(best, f).find("200 Mbit/s"), std::string::npos) << describe(best, f);
}

TEST(RegionOrder, FollowsTheFastDirectionOfAnAsymmetricPair) {
  // r0 -> r1 is slow, r1 -> r0 fast: the ring must run r0 -> r2 -> r1 -> r0.
  const auto regions = names(3);
  const Figures f = matrix(regions, [](std::size_t i, std::size_t j) { return i == 0 && j == 1 ? kSlow : kFast; });
  EXPECT_EQ(best_ring(f, regions).order, (std::vector<std::string>{"r0", "r2", "r1"}));
}

TEST(RegionOrder, WithoutAMatrixTheGivenOrderStands) {
  Figures f = default_figures();
  const std::vector<std::string> regions{"us", "eu", "ap"};
  EXPECT_EQ(best_ring(f, regions).order, regions);
  EXPECT_EQ(best_ring(f, {"us"}).order, std::vector<std::string>{"us"});
  EXPECT_EQ(best_ring(f, {}).order, std::vector<std::string>{});
}

TEST(RegionOrder, FindsAHiddenFastTourPastTheExactSearch) {
  // 14 regions; only the hops of one scrambled tour are fast.
  const int n = 14;
  const auto regions = names(n);
  std::vector<std::size_t> tour{0, 7, 3, 11, 5, 13, 1, 9, 2, 12, 6, 10, 4, 8};
  std::vector<std::size_t> next(n);
  for (std::size_t k = 0; k < tour.size(); ++k) next[tour[k]] = tour[(k + 1) % tour.size()];
  const Figures f = matrix(regions, [&](std::size_t i, std::size_t j) { return next[i] == j ? kFast : kSlow; });
  static_assert(kExactRegions < 14);
  const RegionRing best = best_ring(f, regions);
  ASSERT_EQ(best.order.size(), regions.size());
  EXPECT_DOUBLE_EQ(best.worst.beta, kFast) << describe(best, f);
}

TEST(RegionOrder, PlanAndSelectorFollowTheRing) {
  // Four regions of two ranks each (one host per region): split rail, top groups {0,2,4,6}
  // and {1,3,5,7}.
  std::vector<Locality> ls;
  for (int r = 0; r < 8; ++r) ls.push_back(Locality{"r" + std::to_string(r / 2), "", "", "h" + std::to_string(r / 2), 0});
  const Figures f = matrix(names(4), [](std::size_t i, std::size_t j) { return i + j == 1 ? kSlow : kFast; });
  for (int rank : {0, 3}) {
    auto plan = hierarchy::make_plan(ls, rank, hierarchy::Choice::automatic);
    ASSERT_TRUE(plan);
    const Selector before(f, ls, {});
    const GroupCost natural = before.group_cost(plan->mine.back());
    ASSERT_TRUE(natural.ring_link.has_value() || natural.link.beta == kSlow);
    EXPECT_DOUBLE_EQ(natural.ring_link.value_or(natural.link).beta, kSlow);

    hierarchy::order_regions(*plan, ls, f);
    const auto& top = plan->mine.back();
    ASSERT_EQ(top.size(), 4);
    EXPECT_EQ(top.rank(top.me), rank);
    EXPECT_EQ(top.rank(0) / 2, 0);  // the first region stays first
    for (int k = 0; k < 4; ++k) {
      const int a = top.rank(k) / 2, b = top.rank((k + 1) % 4) / 2;
      EXPECT_FALSE(a + b == 1) << "ring crosses r0-r1 at position " << k;
    }
    // Every top-level group in the same order, and this rank's group among them.
    for (const auto& g : plan->levels.back().groups)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(g[static_cast<std::size_t>(k)] / 2, top.rank(k) / 2);
    EXPECT_NE(plan->describe().find("regions in ring order"), std::string::npos) << plan->describe();

    // The ring is priced on its own hops; direct still crosses the slow pair.
    const Selector after(f, ls, {});
    const GroupCost ordered = after.group_cost(top);
    ASSERT_TRUE(ordered.ring_link.has_value());
    EXPECT_DOUBLE_EQ(ordered.ring_link->beta, kFast);
    EXPECT_DOUBLE_EQ(ordered.link.beta, kSlow);
    const double n = 64.0 * (1 << 20);
    const auto ring = predict(collectives::AlgorithmId::ring, CollectiveKind::allreduce, 4, n, ordered);
    const auto ring_before = predict(collectives::AlgorithmId::ring, CollectiveKind::allreduce, 4, n, natural);
    ASSERT_TRUE(ring && ring_before);
    EXPECT_NEAR(ring_before->beta / ring->beta, 4.0, 1e-9);
  }
}

}  // namespace
}  // namespace strata::topology
