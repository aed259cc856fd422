// Which hierarchical plan each layout gets, and the groups a rank runs it over.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hierarchy/plan.hpp"
#include "strata/errors.hpp"
#include "topology/levels.hpp"

namespace hier = strata::hierarchy;
using strata::Locality;

namespace {

Locality at(const std::string& region, const std::string& host) { return Locality{region, "", "", host, 0}; }

TEST(HierPlan, UniformLayoutsGetSplitRailWithEveryRankAtEveryLevel) {
  const auto locs = strata::topology::synthesize_uniform(3, 2, 4);  // 24 ranks
  for (int r = 0; r < 24; ++r) {
    const auto p = hier::make_plan(locs, r, hier::Choice::automatic);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->kind, hier::Plan::Kind::split_rail);
    ASSERT_EQ(p->depth(), 3);  // host, rack, region
    int product = 1;
    for (const auto& g : p->mine) {
      ASSERT_FALSE(g.ranks.empty());
      EXPECT_EQ(g.rank(g.me), r);
      product *= g.size();
    }
    EXPECT_EQ(product, 24);
    EXPECT_EQ(p->mine.back().size(), 3);  // one rank per region on each rail
  }
}

TEST(HierPlan, UnevenLayoutsGetLeadersAndOnlyLeadersCrossRegions) {
  const std::vector<Locality> locs = {at("us", "u0"), at("us", "u0"), at("us", "u1"),
                                      at("eu", "e0"), at("ap", "a0"), at("ap", "a1")};
  const auto p0 = hier::make_plan(locs, 0, hier::Choice::hierarchical);
  ASSERT_TRUE(p0.has_value());
  EXPECT_EQ(p0->kind, hier::Plan::Kind::leader);
  EXPECT_EQ(p0->mine.back().ranks, (std::vector<int>{0, 3, 4}));
  const auto p1 = hier::make_plan(locs, 1, hier::Choice::hierarchical);
  EXPECT_TRUE(p1->mine.back().ranks.empty());  // not a leader: stays inside its region
  EXPECT_NE(p0->describe().find("leader plan"), std::string::npos);
}

TEST(HierPlan, OneRegionOrFlatMeansNoPlan) {
  const std::vector<Locality> one = {at("us", "u0"), at("us", "u1")};
  EXPECT_FALSE(hier::make_plan(one, 0, hier::Choice::automatic).has_value());
  EXPECT_FALSE(hier::make_plan(strata::topology::synthesize_uniform(2, 1, 1), 0, hier::Choice::flat).has_value());
  try {
    hier::make_plan(one, 0, hier::Choice::hierarchical);
    FAIL() << "forcing the hierarchy on one region must be refused";
  } catch (const strata::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("region 'us'"), std::string::npos) << e.what();
  }
}

TEST(HierPlan, ChoiceNamesTheVariable) {
  EXPECT_EQ(hier::parse_choice("hier"), hier::Choice::hierarchical);
  try {
    hier::parse_choice("rnig");  // "ring" is a rule of the override grammar
    FAIL();
  } catch (const strata::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("STRATA_ALGO='rnig'"), std::string::npos);
  }
}

}  // namespace
