// Topology file parsing (syntax and semantic errors name file, line and field) and the
// derivation of levels and groups from localities.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/settings_check.hpp"
#include "strata/errors.hpp"
#include "topology/levels.hpp"
#include "topology/topology_file.hpp"

namespace topo = strata::topology;
using strata::Locality;
using topo::Level;

namespace {

// The message of the InvalidArgument that parsing `text` throws ("" when it does not).
std::string parse_error(const std::string& text, int world = -1) {
  try {
    topo::parse_topology(text, "t.textproto", world);
  } catch (const strata::InvalidArgument& e) {
    return e.what();
  }
  return "";
}

const char* kGood = R"(placement { rank: 0 region: "us" host: "a" }
placement { rank: 1 region: "us" host: "a" }
placement { rank: 2 region: "eu" host: "b" }
placement { rank: 3 region: "eu" host: "b" }
host { latency_us: 1.5 bandwidth_gbps: 400 }
rack { latency_us: 3 bandwidth_gbps: 100 }
wan { from_region: "us" to_region: "eu" latency_ms: 25 bandwidth_mbps: 200 }
)";

std::string placements(int n) {
  std::string s;
  for (int r = 0; r < n; ++r)
    s += "placement { rank: " + std::to_string(r) + " region: \"" + (r < n / 2 ? "us" : "eu") +
         "\" host: \"h" + std::to_string(r) + "\" }\n";
  return s;
}

Locality at(std::string region, std::string host, std::string rack = "", std::string cluster = "") {
  return Locality{std::move(region), std::move(cluster), std::move(rack), std::move(host), 0};
}

std::vector<std::vector<int>> groups(const std::vector<topo::LevelGroups>& levels, Level l) {
  for (const auto& lg : levels)
    if (lg.level == l) return lg.groups;
  return {};
}

std::vector<Level> level_list(const std::vector<topo::LevelGroups>& levels) {
  std::vector<Level> out;
  for (const auto& lg : levels) out.push_back(lg.level);
  return out;
}

std::filesystem::path examples() {
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "bench" / "topologies";
}

}  // namespace

TEST(TopologyFile, ParsesEverySection) {
  const auto f = topo::parse_topology(kGood, "t.textproto", 4);
  ASSERT_EQ(f.placements.size(), 4u);
  EXPECT_EQ(f.placements[2].where.region, "eu");
  EXPECT_EQ(f.placements[2].where.host, "b");
  EXPECT_EQ(f.placements[3].pos.line, 4);
  ASSERT_TRUE(f.host && f.rack);
  EXPECT_FALSE(f.cluster);
  EXPECT_DOUBLE_EQ(f.host->latency_us, 1.5);
  EXPECT_DOUBLE_EQ(f.rack->bandwidth_gbps, 100);
  ASSERT_EQ(f.wan.size(), 2u);  // the missing direction is mirrored
  const auto* back = f.wan_link("eu", "us");
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(back->mirrored);
  EXPECT_DOUBLE_EQ(back->latency_ms, 25);
  EXPECT_DOUBLE_EQ(back->bandwidth_mbps, 200);
  EXPECT_FALSE(f.wan_link("us", "eu")->mirrored);
  EXPECT_EQ(f.placement_regions(), (std::vector<std::string>{"us", "eu"}));
}

TEST(TopologyFile, KeepsBothDirectionsWhenGiven) {
  const auto f = topo::parse_topology(std::string(kGood) +
                                          "wan { from_region: \"eu\" to_region: \"us\" latency_ms: 30 "
                                          "bandwidth_mbps: 100 }\n",
                                      "t.textproto");
  EXPECT_DOUBLE_EQ(f.wan_link("eu", "us")->bandwidth_mbps, 100);
  EXPECT_DOUBLE_EQ(f.wan_link("us", "eu")->bandwidth_mbps, 200);
}

TEST(TopologyFile, ExampleFilesParse) {
  const auto two = topo::load_topology_file((examples() / "two-regions.textproto").string(), 8);
  EXPECT_EQ(two.placements.size(), 8u);
  EXPECT_DOUBLE_EQ(two.wan_link("eu-west", "us-east")->bandwidth_mbps, 200);
  EXPECT_DOUBLE_EQ(two.wan_link("eu-west", "us-east")->latency_ms, 25);
  const auto three = topo::load_topology_file((examples() / "three-regions-uneven.textproto").string());
  EXPECT_EQ(three.placements.size(), 12u);
  EXPECT_EQ(three.wan.size(), 6u);
  std::vector<Locality> ls(12);
  EXPECT_FALSE(topo::derive_layout(topo::apply_placements(three, ls)).uniform);
}

TEST(TopologyFile, ReadsTheFileStrataTopoFileNames) {
  ::unsetenv("STRATA_TOPO_FILE");
  EXPECT_FALSE(strata::detail::topology_file(strata::detail::check_settings({}), 8));
  ::setenv("STRATA_TOPO_FILE", (examples() / "two-regions.textproto").c_str(), 1);
  const auto f = strata::detail::topology_file(strata::detail::check_settings({}), 8);
  ::unsetenv("STRATA_TOPO_FILE");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->placements.size(), 8u);
}

TEST(TopologyFile, UnreadableFileIsNamed) {
  EXPECT_THROW(topo::load_topology_file("/nonexistent/topo.textproto"), strata::InvalidArgument);
}

TEST(TopologyFileSyntax, UnknownFieldNamesLineColumnAndField) {
  const std::string text =
      "placement { rank: 0 host: \"a\" }\n"
      "wan {\n"
      "  from_region: \"us\"\n"
      "  bandwith_mbps: 5\n"
      "}\n";
  EXPECT_EQ(parse_error(text), "t.textproto:4:3: no field named 'bandwith_mbps' in WanLink");
}

TEST(TopologyFileSyntax, BadValueAndBadBraceNameTheirLine) {
  EXPECT_EQ(parse_error("host { latency_us: fast }\n"),
            "t.textproto:1:20: latency_us: Expected double, got: fast");
  EXPECT_EQ(parse_error("host { latency_us: \"1\" }\n"),
            "t.textproto:1:20: latency_us: Expected double, got: \"1\"");
  const auto unclosed = parse_error("host { latency_us: 1\n\nrack { }\n");
  EXPECT_EQ(unclosed.rfind("t.textproto:", 0), 0u) << unclosed;
  EXPECT_EQ(parse_error("placement { rank: 1.5 host: \"a\" }\n"),
            "t.textproto:1:19: rank: Expected integer, got: 1.5");
}

TEST(TopologyFileSemantics, DuplicateRank) {
  const std::string text =
      "placement { rank: 0 host: \"a\" }\n"
      "placement { rank: 0 host: \"b\" }\n";
  EXPECT_EQ(parse_error(text), "t.textproto:2:13: placement.rank: rank 0 is placed twice (first at line 1)");
}

TEST(TopologyFileSemantics, RankOutOfRange) {
  EXPECT_EQ(parse_error(placements(2) + "placement { rank: 7 host: \"x\" }\n", 4),
            "t.textproto:3:13: placement.rank: rank 7 is out of range for world size 4");
  EXPECT_EQ(parse_error("placement { rank: 1 host: \"x\" }\n"),
            "t.textproto:1:13: placement.rank: rank 1 is out of range for 1 placements");
  EXPECT_EQ(parse_error("placement { rank: -1 host: \"x\" }\n", 2),
            "t.textproto:1:13: placement.rank: rank -1 is out of range for world size 2");
}

TEST(TopologyFileSemantics, UnplacedRanksAndMissingHost) {
  const auto msg = parse_error(placements(2), 4);
  EXPECT_NE(msg.find("t.textproto:1:1: placement: 2 rank(s) of world size 4 are not placed (2, 3)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(parse_error("placement { rank: 0 region: \"us\" }\n"),
            "t.textproto:1:1: placement.host: rank 0 has no host");
}

TEST(TopologyFileSemantics, NegativeFigures) {
  EXPECT_EQ(parse_error(std::string(kGood) + "\n"
                                             "cluster {\n"
                                             "  latency_us: 2\n"
                                             "  bandwidth_gbps: -10\n"
                                             "}\n"),
            "t.textproto:11:3: cluster.bandwidth_gbps: bandwidth -10 must be positive");
  EXPECT_EQ(parse_error("host { latency_us: -1 bandwidth_gbps: 5 }\n"),
            "t.textproto:1:8: host.latency_us: latency -1 is negative");
  EXPECT_EQ(parse_error(placements(4) +
                        "wan { from_region: \"us\" to_region: \"eu\" latency_ms: 5 bandwidth_mbps: -200 }\n"),
            "t.textproto:5:55: wan.bandwidth_mbps: bandwidth -200 must be positive");
  EXPECT_EQ(parse_error(placements(4) +
                        "wan { from_region: \"us\" to_region: \"eu\" latency_ms: -5 bandwidth_mbps: 200 }\n"),
            "t.textproto:5:41: wan.latency_ms: latency -5 is negative");
  EXPECT_EQ(parse_error(placements(4) + "wan { from_region: \"us\" to_region: \"eu\" latency_ms: 5 bandwidth_mbps: 200 "
                                        "loss_percent: 100 }\n"),
            "t.textproto:5:75: wan.loss_percent: loss 100 must be at least 0 and below 100 (percent of packets)");
}

TEST(TopologyFileSemantics, WanRegionWithoutRanks) {
  EXPECT_EQ(parse_error(placements(4) +
                        "wan { from_region: \"us\" to_region: \"eu\" latency_ms: 5 bandwidth_mbps: 1 }\n"
                        "wan { from_region: \"us\" to_region: \"mars\" latency_ms: 5 bandwidth_mbps: 1 }\n"),
            "t.textproto:6:1: wan.to_region: no rank is in region 'mars' (placements)");
}

TEST(TopologyFileSemantics, MissingPairInMatrix) {
  std::string text;
  for (int r = 0; r < 3; ++r)
    text += "placement { rank: " + std::to_string(r) + " region: \"g" + std::to_string(r) + "\" host: \"h" +
            std::to_string(r) + "\" }\n";
  text +=
      "wan { from_region: \"g0\" to_region: \"g1\" latency_ms: 5 bandwidth_mbps: 1 }\n"
      "wan { from_region: \"g2\" to_region: \"g1\" latency_ms: 5 bandwidth_mbps: 1 }\n";
  EXPECT_EQ(parse_error(text),
            "t.textproto: wan: no link between regions 'g0' and 'g2' (3 regions need all 3 pairs)");
  // Without placements the pairs the matrix names must still be complete.
  EXPECT_NE(parse_error(text.substr(text.find("wan"))).find("no link between regions 'g0' and 'g2'"),
            std::string::npos);
}

TEST(TopologyFileSemantics, SelfLinkAndRepeatedLink) {
  EXPECT_EQ(parse_error("wan { from_region: \"us\" to_region: \"us\" latency_ms: 5 bandwidth_mbps: 1 }\n"),
            "t.textproto:1:25: wan.to_region: link from region 'us' to itself");
  EXPECT_EQ(parse_error("wan { from_region: \"us\" to_region: \"eu\" latency_ms: 5 bandwidth_mbps: 1 }\n"
                        "wan { from_region: \"us\" to_region: \"eu\" latency_ms: 6 bandwidth_mbps: 1 }\n"),
            "t.textproto:2:1: wan: link us -> eu is given twice (first at line 1)");
}

TEST(TopologyFile, OverridesEnvLocalities) {
  const auto f = topo::parse_topology(kGood, "t.textproto", 4);
  std::vector<Locality> env(4, at("", "localhost"));
  const auto ls = topo::apply_placements(f, env);
  EXPECT_EQ(ls[0].region, "us");
  EXPECT_EQ(ls[3].host, "b");
  EXPECT_EQ(ls[1].local_rank, 1);
  EXPECT_EQ(ls[2].local_rank, 0);
  EXPECT_THROW(topo::apply_placements(f, std::vector<Locality>(5)), strata::InvalidArgument);
}

TEST(TopologyFile, WithoutPlacementsChecksEnvRegions) {
  const auto f = topo::parse_topology(
      "wan { from_region: \"us\" to_region: \"eu\" latency_ms: 5 bandwidth_mbps: 1 }\n", "t.textproto");
  const std::vector<Locality> env{at("us", "a"), at("eu", "b")};
  EXPECT_EQ(topo::apply_placements(f, env)[1].region, "eu");
  try {
    topo::apply_placements(f, {at("us", "a"), at("ap", "b")});
    FAIL() << "expected an error";
  } catch (const strata::InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "t.textproto:1:1: wan.to_region: no rank is in region 'eu' (the ranks' localities)");
  }
  EXPECT_THROW(topo::check_wan_regions(f, {at("us", "a"), at("eu", "b"), at("ap", "c")}),
               strata::InvalidArgument);
}

TEST(Levels, TwoRegionsTwoHostsTwoRanks) {
  const auto layout = topo::derive_layout(topo::synthesize_uniform(2, 2, 2));
  ASSERT_TRUE(layout.uniform) << layout.irregularity;
  EXPECT_EQ(level_list(layout.split_rail), (std::vector<Level>{Level::host, Level::rack, Level::region}));
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(groups(layout.split_rail, Level::host), (G{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(groups(layout.split_rail, Level::rack), (G{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(groups(layout.split_rail, Level::region), (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  const auto mine = topo::groups_of(layout.split_rail, 3);
  ASSERT_EQ(mine.size(), 3u);
  EXPECT_EQ(mine[0].ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(mine[0].me, 1);
  EXPECT_EQ(mine[1].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(mine[1].me, 1);
  EXPECT_EQ(mine[2].level, Level::region);
  EXPECT_EQ(mine[2].ranks, (std::vector<int>{3, 7}));
  EXPECT_EQ(mine[2].me, 0);
  EXPECT_EQ(groups(layout.leader, Level::region), (G{{0, 4}}));
}

TEST(Levels, ThreeRegionsWithUnevenHosts) {
  std::vector<Locality> ls;
  const std::vector<std::pair<std::string, int>> shape{{"us", 2}, {"eu", 1}, {"ap", 3}};
  for (const auto& [region, hosts] : shape)
    for (int h = 0; h < hosts; ++h)
      for (int k = 0; k < 2; ++k) ls.push_back(at(region, "h" + std::to_string(h)));
  const auto layout = topo::derive_layout(ls);
  EXPECT_FALSE(layout.uniform);
  EXPECT_EQ(layout.irregularity, "racks differ in hosts: 'us/-/-' has 2, 'eu/-/-' has 1");
  EXPECT_TRUE(layout.split_rail.empty());
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(level_list(layout.leader), (std::vector<Level>{Level::host, Level::rack, Level::region}));
  EXPECT_EQ(groups(layout.leader, Level::host), (G{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}}));
  EXPECT_EQ(groups(layout.leader, Level::rack), (G{{0, 2}, {4}, {6, 8, 10}}));
  EXPECT_EQ(groups(layout.leader, Level::region), (G{{0, 4, 6}}));
  EXPECT_EQ(topo::groups_of(layout.leader, 3).size(), 1u);  // not a host leader
  const auto leader = topo::groups_of(layout.leader, 8);
  ASSERT_EQ(leader.size(), 2u);
  EXPECT_EQ(leader[1].ranks, (std::vector<int>{6, 8, 10}));
  EXPECT_EQ(leader[1].me, 1);
}

TEST(Levels, MoreRanksOnOneHostIsNotUniform) {
  auto ls = topo::synthesize_uniform(2, 2, 2);
  ls.push_back(at("region1", "region1-host1"));
  const auto layout = topo::derive_layout(ls);
  EXPECT_FALSE(layout.uniform);
  EXPECT_NE(layout.irregularity.find("hosts differ in ranks"), std::string::npos) << layout.irregularity;
}

TEST(Levels, OneRegion) {
  const auto layout = topo::derive_layout(topo::synthesize_uniform(1, 2, 4));
  ASSERT_TRUE(layout.uniform);
  EXPECT_EQ(level_list(layout.split_rail), (std::vector<Level>{Level::host, Level::rack}));
  EXPECT_EQ(groups(layout.split_rail, Level::rack),
            (std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(Levels, RanksInterleavedAcrossRegions) {
  // Even ranks in us, odd in eu; both regions call their hosts h0 and h1.
  std::vector<Locality> ls;
  for (int r = 0; r < 8; ++r) ls.push_back(at(r % 2 ? "eu" : "us", "h" + std::to_string(r / 4)));
  const auto layout = topo::derive_layout(ls);
  ASSERT_TRUE(layout.uniform) << layout.irregularity;
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(groups(layout.split_rail, Level::host), (G{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(groups(layout.split_rail, Level::rack), (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(groups(layout.split_rail, Level::region), (G{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(Levels, SingleRank) {
  const auto layout = topo::derive_layout({at("us", "a")});
  EXPECT_TRUE(layout.uniform);
  EXPECT_TRUE(layout.split_rail.empty());
  EXPECT_TRUE(layout.leader.empty());
  EXPECT_TRUE(topo::groups_of(layout.split_rail, 0).empty());
  EXPECT_THROW(topo::derive_layout({}), strata::InvalidArgument);
}

// Uniform layouts of every small shape, with ranks numbered in a shuffled order: every rank
// is in exactly one group per level, a level's groups have one size, and the sizes multiply
// to the world size; leader levels hold each rank at most once.
TEST(Levels, PropertiesOfUniformLayouts) {
  std::mt19937 rng(7);
  for (int regions = 1; regions <= 3; ++regions)
    for (int clusters = 1; clusters <= 2; ++clusters)
      for (int racks = 1; racks <= 2; ++racks)
        for (int hosts = 1; hosts <= 3; ++hosts)
          for (int per_host = 1; per_host <= 3; ++per_host) {
            std::vector<Locality> ls;
            for (int g = 0; g < regions; ++g)
              for (int c = 0; c < clusters; ++c)
                for (int k = 0; k < racks; ++k)
                  for (int h = 0; h < hosts; ++h)
                    for (int i = 0; i < per_host; ++i)
                      ls.push_back(Locality{"g" + std::to_string(g), "c" + std::to_string(c),
                                            "k" + std::to_string(k), "h" + std::to_string(h), 0});
            std::shuffle(ls.begin(), ls.end(), rng);
            const int world = static_cast<int>(ls.size());
            const auto layout = topo::derive_layout(ls);
            SCOPED_TRACE(std::to_string(regions) + "x" + std::to_string(clusters) + "x" +
                         std::to_string(racks) + "x" + std::to_string(hosts) + "x" +
                         std::to_string(per_host));
            ASSERT_TRUE(layout.uniform) << layout.irregularity;
            long product = 1;
            for (const auto& lg : layout.split_rail) {
              std::vector<int> seen(static_cast<std::size_t>(world), 0);
              for (std::size_t gi = 0; gi < lg.groups.size(); ++gi) {
                EXPECT_EQ(lg.groups[gi].size(), lg.groups[0].size());
                EXPECT_GT(lg.groups[gi].size(), 1u);
                for (int r : lg.groups[gi]) {
                  ++seen[static_cast<std::size_t>(r)];
                  EXPECT_EQ(lg.group_of[static_cast<std::size_t>(r)], static_cast<int>(gi));
                }
              }
              EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
              product *= static_cast<long>(lg.groups[0].size());
            }
            EXPECT_EQ(product, world);
            for (const auto& lg : layout.leader) {
              std::vector<int> seen(static_cast<std::size_t>(world), 0);
              for (const auto& g : lg.groups)
                for (int r : g) ++seen[static_cast<std::size_t>(r)];
              EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n <= 1; }));
            }
            for (int r = 0; r < world; ++r)
              for (const auto& g : topo::groups_of(layout.split_rail, r))
                EXPECT_EQ(g.ranks[static_cast<std::size_t>(g.me)], r);
          }
}
