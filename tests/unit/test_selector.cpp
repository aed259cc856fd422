// The override grammar (accepts, rejects naming the token) and the selector's score
// tables: the model's winner per size, STRATA_ALGO's rules first, and the fall back to
// the next best when an algorithm declines a call.
#include <gtest/gtest.h>

#include "collectives/dispatch.hpp"
#include "collectives/registry.hpp"
#include "hierarchy/plan.hpp"
#include "one_host.hpp"
#include "strata/errors.hpp"
#include "topology/algorithm_rules.hpp"
#include "topology/figures.hpp"
#include "topology/selector.hpp"

namespace strata::topology {
namespace {

using collectives::AlgorithmId;
using K = CollectiveKind;

std::string error_of(const std::string& spec, bool allow_plan = true) {
  try {
    parse_algorithm_rules(spec, "STRATA_ALGO", allow_plan);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(SelectorGrammar, AcceptsRulesWithRangesAndAliases) {
  const auto r = parse_algorithm_rules("allreduce:0-64k:tree#64k-inf:ring", "STRATA_ALGO", true);
  EXPECT_FALSE(r.plan.has_value());
  ASSERT_EQ(r.rules.size(), 2u);
  EXPECT_EQ(r.rules[0].kind, K::allreduce);
  EXPECT_EQ(r.rules[0].lo, 0u);
  EXPECT_EQ(r.rules[0].hi, 64u << 10);
  EXPECT_EQ(r.rules[0].algorithm->id, AlgorithmId::double_tree);
  // The second rule names no collective: it keeps the previous rule's.
  EXPECT_EQ(r.rules[1].kind, K::allreduce);
  EXPECT_EQ(r.rules[1].lo, 64u << 10);
  EXPECT_EQ(r.rules[1].hi, UINT64_MAX);
  EXPECT_EQ(r.rules[1].algorithm->id, AlgorithmId::ring);

  EXPECT_EQ(r.match(K::allreduce, 1000)->algorithm->id, AlgorithmId::double_tree);
  EXPECT_EQ(r.match(K::allreduce, 64u << 10)->algorithm->id, AlgorithmId::double_tree);  // inclusive, first wins
  EXPECT_EQ(r.match(K::allreduce, 1u << 30)->algorithm->id, AlgorithmId::ring);
  EXPECT_EQ(r.match(K::broadcast, 10), nullptr);
}

TEST(SelectorGrammar, AcceptsPlanWordsAndSpellings) {
  EXPECT_EQ(parse_algorithm_rules("auto", "STRATA_ALGO", true).plan, PlanChoice::automatic);
  EXPECT_EQ(parse_algorithm_rules("hier", "STRATA_ALGO", true).plan, PlanChoice::hierarchical);
  const auto r = parse_algorithm_rules(" flat # bcast:1K-2m:chain # all_reduce:direct # 0-1G:auto # ring ", "STRATA_ALGO", true);
  EXPECT_EQ(r.plan, PlanChoice::flat);
  ASSERT_EQ(r.rules.size(), 4u);
  EXPECT_EQ(r.rules[0].kind, K::broadcast);
  EXPECT_EQ(r.rules[0].lo, 1024u);
  EXPECT_EQ(r.rules[0].hi, 2u << 20);
  EXPECT_EQ(r.rules[1].kind, K::allreduce);
  EXPECT_EQ(r.rules[2].kind, K::allreduce);  // sticky
  EXPECT_EQ(r.rules[2].hi, 1u << 30);
  EXPECT_EQ(r.rules[2].algorithm, nullptr);  // auto: the selector decides
  EXPECT_EQ(r.rules[3].algorithm->id, AlgorithmId::ring);
  // A bare name is a rule for every collective.
  const auto every = parse_algorithm_rules("direct", "algorithm", false);
  ASSERT_EQ(every.rules.size(), 1u);
  EXPECT_FALSE(every.rules[0].kind.has_value());
  EXPECT_TRUE(parse_algorithm_rules("", "STRATA_ALGO", true).empty());
  // all: back to every collective after a specific one.
  EXPECT_FALSE(parse_algorithm_rules("reduce:ring#all:direct", "x", false).rules[1].kind.has_value());
}

TEST(SelectorGrammar, RejectsNamingTheToken) {
  struct Bad {
    const char* spec;
    const char* token;
  };
  const Bad bad[] = {
      {"allreduce:0-64x:ring", "'64x'"},
      {"allredce:ring", "'allredce'"},
      {"allreduce:0-64k:rnig", "'rnig'"},
      {"allreduce:64k-1k:ring", "'64k-1k'"},
      {"allreduce:64k:ring", "'64k'"},
      {"allreduce:inf-1k:ring", "'inf'"},
      {"allreduce:0-99999999999999999999:ring", "'99999999999999999999'"},
      {"a:0-1:ring:x", "too many ':'"},
      {"ring##direct", "empty rule"},
      {"flat#hier", "'hier' is a second plan word"},
      {"allreduce:", "no algorithm named"},
  };
  for (const auto& b : bad) {
    const std::string e = error_of(b.spec);
    EXPECT_NE(e.find(b.token), std::string::npos) << b.spec << " -> " << e;
    EXPECT_NE(e.find("STRATA_ALGO='"), std::string::npos) << e;
  }
  // The rule is named when the spec has several.
  EXPECT_NE(error_of("ring#allreduce:0-1q:ring").find("rule 'allreduce:0-1q:ring'"), std::string::npos);
  // Plan words are STRATA_ALGO's alone.
  EXPECT_NE(error_of("hier", false).find("'hier' chooses a plan"), std::string::npos);
  // The valid names are listed with an unknown one.
  EXPECT_NE(error_of("nope").find(collectives::algorithm_names()), std::string::npos);
}

TEST(SelectorGrammar, HierarchyReadsOnlyThePlanWord) {
  namespace hier = strata::hierarchy;
  EXPECT_EQ(hier::parse_choice("auto"), hier::Choice::automatic);
  EXPECT_EQ(hier::parse_choice("allreduce:ring"), hier::Choice::automatic);
  EXPECT_EQ(hier::parse_choice("flat#allreduce:0-64k:tree"), hier::Choice::flat);
  EXPECT_EQ(hier::parse_choice("allreduce:ring#hier"), hier::Choice::hierarchical);
  EXPECT_THROW(hier::parse_choice("allreduce:0-1x:ring"), InvalidArgument);
}

TEST(SelectorGrammar, PerCallResolution) {
  const std::string spec = "allreduce:0-4k:recursive_doubling#4k-inf:ring";
  EXPECT_EQ(resolve_call_algorithm(spec, K::allreduce, DataType::f32, 1024, 4)->id, AlgorithmId::recursive_doubling);
  EXPECT_EQ(resolve_call_algorithm(spec, K::allreduce, DataType::f32, 1025, 4)->id, AlgorithmId::ring);
  EXPECT_EQ(resolve_call_algorithm(spec, K::broadcast, DataType::f32, 1, 4), nullptr);  // no rule: automatic
  EXPECT_EQ(resolve_call_algorithm("", K::allreduce, DataType::f32, 1, 4), nullptr);
  // Sizes of reduce_scatter and allgather count every rank's block, as nccl-tests does.
  EXPECT_EQ(resolve_call_algorithm("reduce_scatter:0-4k:direct", K::reduce_scatter, DataType::f32, 256, 4)->id,
            AlgorithmId::direct);
  EXPECT_EQ(resolve_call_algorithm("reduce_scatter:0-4k:direct", K::reduce_scatter, DataType::f32, 257, 4), nullptr);
  try {
    resolve_call_algorithm("ring", K::broadcast, DataType::f32, 1, 2);
    FAIL() << "ring has no broadcast";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'ring' does not support broadcast"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("chain"), std::string::npos) << e.what();
  }
}

TEST(SelectorGrammar, SizesFormatBack) {
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_size(64u << 10), "64k");
  EXPECT_EQ(format_size(3u << 30), "3g");
  EXPECT_EQ(format_size(1536), "1536");
  EXPECT_EQ(format_size(UINT64_MAX), "inf");
  EXPECT_EQ(message_bytes(K::allgather, 10, DataType::f64, 3), 240u);
  EXPECT_EQ(message_bytes(K::allreduce, 10, DataType::f64, 3), 80u);
}

TEST(SelectorTable, PicksByRegime) {
  Selector sel(shm_figures(), one_host(4), {});
  const auto world = collectives::Group::world(0, 4);
  sel.add_group(world);
  const auto& small = sel.choose(K::allreduce, DataType::f32, 2, world);
  const auto& large = sel.choose(K::allreduce, DataType::f32, 1 << 24, world);
  // Few messages when latency rules, bandwidth-optimal algorithms when bytes do.
  EXPECT_TRUE(small.id == AlgorithmId::exchange || small.id == AlgorithmId::recursive_doubling ||
              small.id == AlgorithmId::direct)
      << small.name;
  EXPECT_TRUE(large.id == AlgorithmId::ring || large.id == AlgorithmId::halving_doubling ||
              large.id == AlgorithmId::direct)
      << large.name;
  // A barrier in one round while each further message costs little next to α; in
  // log2 p rounds where every message queues for as long as a round takes.
  EXPECT_EQ(sel.choose(K::barrier, DataType::u8, 0, world).id, AlgorithmId::exchange);
  Figures queued = shm_figures();
  queued.of(LinkClass::shm).cost.gap = queued.of(LinkClass::shm).cost.alpha;
  Selector busy(queued, one_host(8), {});
  const auto eight = collectives::Group::world(0, 8);
  busy.add_group(eight);
  EXPECT_EQ(busy.choose(K::barrier, DataType::u8, 0, eight).id, AlgorithmId::dissemination);
  // Every table covers every size, in order, without gaps.
  for (const auto& t : sel.tables()) {
    const auto ranges = t.ranges();
    ASSERT_FALSE(ranges.empty());
    EXPECT_EQ(ranges.front().lo, 0u);
    EXPECT_EQ(ranges.back().hi, UINT64_MAX);
    for (std::size_t i = 1; i < ranges.size(); ++i) EXPECT_EQ(ranges[i].lo, ranges[i - 1].hi + 1);
  }
}

TEST(SelectorTable, FallsBackWhenAnAlgorithmDeclines) {
  // binomial ranks first here but has no allreduce: the call goes to the next one.
  const std::vector<Score> ranked = {{AlgorithmId::binomial, {}}, {AlgorithmId::chain, {}}, {AlgorithmId::ring, {}}};
  EXPECT_EQ(first_supported(ranked, K::allreduce, DataType::f32, 10, 4).id, AlgorithmId::ring);
  // Nothing in the list supports it: any registered algorithm that does.
  EXPECT_EQ(first_supported({{AlgorithmId::chain, {}}}, K::reduce, DataType::f32, 10, 4).id, AlgorithmId::ring);
  // A STRATA_ALGO rule whose algorithm declines the call hands it to the table.
  Selector sel(shm_figures(), one_host(4), parse_algorithm_rules("chain#allreduce:direct", "STRATA_ALGO", true));
  const auto world = collectives::Group::world(0, 4);
  sel.add_group(world);
  Selector plain(shm_figures(), one_host(4), {});
  plain.add_group(world);
  EXPECT_EQ(sel.choose(K::broadcast, DataType::f32, 1 << 20, world).id, AlgorithmId::chain);
  EXPECT_EQ(sel.choose(K::reduce, DataType::f32, 1 << 20, world).id, plain.choose(K::reduce, DataType::f32, 1 << 20, world).id);
  // chain declines allreduce, so the later allreduce rule is not reached: rules match
  // first, support is checked after, and the table decides.
  EXPECT_EQ(sel.choose(K::allreduce, DataType::f32, 1, world).id, plain.choose(K::allreduce, DataType::f32, 1, world).id);
  Selector forced(shm_figures(), one_host(4), parse_algorithm_rules("allreduce:direct", "STRATA_ALGO", true));
  forced.add_group(world);
  EXPECT_EQ(forced.choose(K::allreduce, DataType::f32, 1 << 24, world).id, AlgorithmId::direct);
}

TEST(SelectorTable, SameInputsSameChoices) {
  const auto world = collectives::Group::world(0, 6);
  Selector a(shm_figures(), one_host(6), {}), b(shm_figures(), one_host(6), {});
  a.add_group(world);
  b.add_group(world);
  EXPECT_EQ(a.digest(), b.digest());
  EXPECT_FALSE(a.digest().empty());
  // A group nobody registered is ranked on the spot, the same way.
  Selector c(shm_figures(), one_host(6), {});
  for (std::size_t n : {1u, 100u, 100000u, 10000000u})
    EXPECT_EQ(c.choose(K::allreduce, DataType::f32, n, world).id, a.choose(K::allreduce, DataType::f32, n, world).id);
}

TEST(SelectorTable, GroupsTakeTheirLinksFigures) {
  // 2 regions x 2 hosts x 1 rank, with a slow WAN.
  std::vector<Locality> ls = {{"us", "", "", "a", 0}, {"us", "", "", "b", 0}, {"eu", "", "", "c", 0}, {"eu", "", "", "d", 0}};
  Figures f = shm_figures();
  set_regions(f, {"us", "eu"});
  f.wan[1] = f.wan[2] = LinkFigure{{0.05, 1e-8}, Source::file};
  Selector sel(f, ls, {});
  collectives::Group in_region{{0, 1}, 0}, across{{0, 2}, 0}, world{{0, 1, 2, 3}, 0};
  EXPECT_EQ(sel.group_class(in_region), LinkClass::net);
  EXPECT_EQ(sel.group_class(across), LinkClass::wan);
  EXPECT_DOUBLE_EQ(sel.group_cost(across).link.alpha, 0.05);
  EXPECT_DOUBLE_EQ(sel.group_cost(world).link.alpha, 0.05);
  EXPECT_EQ(sel.group_cost(in_region).link, f.of(LinkClass::net).cost);
  // Across a 50 ms WAN a small allreduce takes the fewest hops: not the ring's 2(p-1).
  EXPECT_NE(sel.choose(K::allreduce, DataType::f32, 16, world).id, AlgorithmId::ring);
  // Two members per region share its egress: all of them send at once in most
  // algorithms, while a ring in region order crosses on one link per region.
  EXPECT_EQ(sel.group_cost(world).wan_sharing, 2);
  EXPECT_EQ(sel.group_cost(world).ring_sharing, 1);
  EXPECT_EQ(sel.group_cost(across).wan_sharing, 1);
  collectives::Group interleaved{{0, 2, 1, 3}, 0};
  EXPECT_EQ(sel.group_cost(interleaved).ring_sharing, 2);
  const GroupCost shared = sel.group_cost(world);
  GroupCost alone = shared;
  alone.wan_sharing = alone.ring_sharing = 1;
  EXPECT_DOUBLE_EQ(predict(AlgorithmId::direct, K::allreduce, 4, 1e6, shared)->beta,
                   2 * predict(AlgorithmId::direct, K::allreduce, 4, 1e6, alone)->beta);
  EXPECT_DOUBLE_EQ(predict(AlgorithmId::ring, K::allreduce, 4, 1e6, shared)->beta,
                   predict(AlgorithmId::ring, K::allreduce, 4, 1e6, alone)->beta);
  // Large vectors across the shared WAN: the ring, whose bytes cross once per region.
  EXPECT_EQ(sel.choose(K::allreduce, DataType::f32, 1 << 26, world).id, AlgorithmId::ring);
}

TEST(SelectorTable, ExplainsTheWinner) {
  const auto t = build_score_table(K::allreduce, LinkClass::shm, 8, GroupCost{{1e-5, 1 / 3e9}, 1e-10, 1 << 20});
  EXPECT_NE(explain(t.at(8)).find("α-bound"), std::string::npos) << explain(t.at(8));
  EXPECT_NE(explain(t.at(1u << 30)).find("β-bound"), std::string::npos) << explain(t.at(1u << 30));
  EXPECT_NE(explain(t.at(8)).find("ahead of"), std::string::npos);
}

TEST(SelectorTable, OutsideACommunicatorTheThresholdRemains) {
  // A context without a chooser keeps the fixed size rule it had before the selector.
  collectives::CollArgs small{K::allreduce, nullptr, nullptr, 16, DataType::f32};
  collectives::CollArgs large{K::allreduce, nullptr, nullptr, 1 << 20, DataType::f32};
  const auto world = collectives::Group::world(0, 4);
  const auto& none = collectives::threshold_chooser();
  EXPECT_EQ(collectives::resolve_algorithm(none, world, small, "t").id, AlgorithmId::recursive_doubling);
  EXPECT_EQ(collectives::resolve_algorithm(none, world, large, "t").id, AlgorithmId::ring);
  Selector sel(shm_figures(), one_host(4), parse_algorithm_rules("allreduce:direct", "STRATA_ALGO", true));
  EXPECT_EQ(collectives::resolve_algorithm(sel, world, small, "t").id, AlgorithmId::direct);
}

}  // namespace
}  // namespace strata::topology
