// The α-β-γ cost model: DESIGN §6's formulas on known values, predictions that never
// fall as messages grow, hierarchical plans against a flat ring across a slow WAN, and
// the figures' plumbing (built-in table, probe records, topology-file precedence).
#include <gtest/gtest.h>

#include <cmath>

#include "collectives/registry.hpp"
#include "topology/cost_model.hpp"
#include "topology/figures.hpp"
#include "topology/topology_file.hpp"

namespace strata::topology {
namespace {

using collectives::AlgorithmId;
using K = CollectiveKind;

// Round figures so expected values can be written out by hand.
GroupCost figures(double alpha = 1e-5, double beta = 1e-9, double gamma = 2e-10, double chunk = 1 << 20) {
  return GroupCost{{alpha, beta}, gamma, chunk};
}

double t(AlgorithmId a, K kind, int p, double n, const GroupCost& g) {
  const auto c = predict(a, kind, p, n, g);
  EXPECT_TRUE(c.has_value()) << collectives::algorithm(a).name << " " << to_string(kind);
  return c ? c->total() : -1;
}

TEST(CostModel, RingAllreduceIsDesignFormula) {
  const auto g = figures();
  for (int p : {2, 3, 4, 7, 16}) {
    for (double n : {1.0, 4096.0, 1e8}) {
      const double f = (p - 1.0) / p;
      const double want = 2 * (p - 1) * g.link.alpha + 2 * f * n * g.link.beta + f * n * g.gamma;
      EXPECT_DOUBLE_EQ(t(AlgorithmId::ring, K::allreduce, p, n, g), want) << "p=" << p << " n=" << n;
    }
  }
}

TEST(CostModel, LogarithmicAlgorithmsOnPowersOfTwo) {
  const auto g = figures();
  const double n = 1 << 20, a = g.link.alpha, b = g.link.beta, c = g.gamma;
  // Rabenseifner: 2 log2 p rounds at the ring's bandwidth.
  EXPECT_DOUBLE_EQ(t(AlgorithmId::halving_doubling, K::allreduce, 8, n, g), 6 * a + 2 * 7.0 / 8 * n * b + 7.0 / 8 * n * c);
  // Recursive doubling: log p rounds of the whole vector, log p · (α + Nβ + Nγ).
  EXPECT_DOUBLE_EQ(t(AlgorithmId::recursive_doubling, K::allreduce, 8, n, g), 3 * (a + n * b + n * c));
  // Direct (colocated parameter server): two rounds at the ring's bandwidth.
  EXPECT_DOUBLE_EQ(t(AlgorithmId::direct, K::allreduce, 8, n, g), 2 * a + 2 * 7.0 / 8 * n * b + 7.0 / 8 * n * c);
  // Binomial broadcast: ceil(log2 p) sends of the whole vector from the root.
  EXPECT_DOUBLE_EQ(t(AlgorithmId::binomial, K::broadcast, 8, n, g), 3 * (a + n * b));
  // Reduce-scatter and allgather: half an allreduce each.
  EXPECT_DOUBLE_EQ(t(AlgorithmId::ring, K::reduce_scatter, 4, n, g), 3 * a + 0.75 * n * (b + c));
  EXPECT_DOUBLE_EQ(t(AlgorithmId::ring, K::allgather, 4, n, g), 3 * a + 0.75 * n * b);
  // Dissemination barrier: ceil(log2 p) rounds of empty messages.
  EXPECT_DOUBLE_EQ(t(AlgorithmId::dissemination, K::barrier, 5, 0, g), 3 * a);
  // Exchange: one round, every rank posting p - 1 messages at once; as an allreduce it
  // also moves and reduces p - 1 whole vectors.
  const GroupCost gg{{a, b, 2e-6}, c, 1 << 20};
  EXPECT_DOUBLE_EQ(t(AlgorithmId::exchange, K::barrier, 5, 0, gg), a + 3 * 2e-6);
  EXPECT_DOUBLE_EQ(t(AlgorithmId::exchange, K::allreduce, 5, 1000, gg), a + 3 * 2e-6 + 4 * 1000 * (b + c));
}

TEST(CostModel, NonPowersOfTwoPayForTheFold) {
  const auto g = figures();
  const double n = 1 << 20;
  // 6 ranks fold to 4: one more exchange of the whole vector each way than 4 ranks.
  EXPECT_GT(t(AlgorithmId::halving_doubling, K::allreduce, 6, n, g), t(AlgorithmId::halving_doubling, K::allreduce, 4, n, g));
  EXPECT_GT(t(AlgorithmId::recursive_doubling, K::allreduce, 6, n, g),
            t(AlgorithmId::recursive_doubling, K::allreduce, 4, n, g));
}

TEST(CostModel, ChainPipelinesChunks) {
  const auto g = figures(1e-5, 1e-9, 0, 1 << 20);
  const double n = 64.0 * (1 << 20);  // 64 chunks
  // The first chunk crosses p - 1 hops, the other 63 follow one chunk time apart: far
  // below (p - 1) whole-vector hops.
  const double chain = t(AlgorithmId::chain, K::broadcast, 8, n, g);
  EXPECT_NEAR(chain, (6 + 64) * 1e-5 + (n + 6 * (1 << 20)) * 1e-9, 1e-12);
  EXPECT_LT(chain, 7 * n * 1e-9);
}

TEST(CostModel, OnlyImplementedCollectives) {
  const auto g = figures();
  EXPECT_FALSE(predict(AlgorithmId::ring, K::broadcast, 4, 1, g).has_value());
  EXPECT_FALSE(predict(AlgorithmId::chain, K::allreduce, 4, 1, g).has_value());
  EXPECT_FALSE(predict(AlgorithmId::dissemination, K::allreduce, 4, 1, g).has_value());
  // Every registered algorithm is priced for each collective its registry entry runs.
  auto shared = g;
  shared.shared_memory = true;
  for (const auto& a : collectives::algorithms())
    for (K k : {K::allreduce, K::reduce_scatter, K::allgather, K::broadcast, K::reduce, K::barrier}) {
      EXPECT_EQ(predict(a.id, k, 4, 1024, g).has_value(), a.supports(k, DataType::f32, 256, 4))
          << a.name << " " << to_string(k);
      EXPECT_EQ(predict(a.id, k, 4, 1024, shared).has_value(), a.supports(k, DataType::f32, 256, {4, 0, true}))
          << a.name << " " << to_string(k) << " with shared memory";
    }
}

// Where members share memory, shared_memory's allreduce puts no byte on a link: it wins
// once its copies through the host's segment cost less than the link's bytes, and never
// where memory is not shared.
TEST(CostModel, SharedMemoryWhereTheReductionOutweighsARound) {
  auto g = figures(5e-6, 2e-10, 1 / 10.5e9);
  EXPECT_NE(best_flat(K::allreduce, 2, 64 << 20, g).algorithm, AlgorithmId::shared_memory);
  g.shared_memory = true;
  EXPECT_NE(best_flat(K::allreduce, 2, 4096, g).algorithm, AlgorithmId::shared_memory);
  for (int p : {2, 3, 4, 8}) EXPECT_EQ(best_flat(K::allreduce, p, 16 << 20, g).algorithm, AlgorithmId::shared_memory) << p;
  const double f = 0.5, n = 1 << 20;
  EXPECT_NEAR(t(AlgorithmId::shared_memory, K::allreduce, 2, n, g), 3 * 5e-6 + 2 * f * n / 10.5e9, 1e-12);
}

TEST(CostModel, MonotonicInSize) {
  auto shared = figures(5e-6, 3e-10, 1e-10, 4096);
  shared.shared_memory = true;
  for (const auto& g : {figures(), figures(5e-6, 3e-10, 1e-10, 4096), figures(0.04, 8e-10, 1e-10), shared}) {
    for (const auto& a : collectives::algorithms())
      for (K k : {K::allreduce, K::reduce_scatter, K::allgather, K::broadcast, K::reduce})
        for (int p : {1, 2, 3, 4, 5, 7, 8, 16, 33}) {
          double prev = -1;
          for (double n = 0; n <= 1e11; n = n == 0 ? 1 : n * 1.7) {
            const auto c = predict(a.id, k, p, n, g);
            if (!c) break;
            EXPECT_GE(c->total(), prev) << a.name << " " << to_string(k) << " p=" << p << " n=" << n;
            EXPECT_GE(c->alpha, 0);
            EXPECT_GE(c->beta, 0);
            EXPECT_GE(c->gamma, 0);
            prev = c->total();
          }
        }
  }
}

TEST(CostModel, LatencyAndBandwidthRegimes) {
  const auto g = figures(2e-5, 3e-10, 1e-10);
  // Tiny messages: log-depth beats the ring's 2(p-1) hops.
  EXPECT_LT(t(AlgorithmId::recursive_doubling, K::allreduce, 16, 8, g), t(AlgorithmId::ring, K::allreduce, 16, 8, g));
  EXPECT_STREQ(predict(AlgorithmId::recursive_doubling, K::allreduce, 16, 8, g)->bound(), "α-bound");
  // Large ones: moving log p whole vectors loses to 2(p-1)/p of one.
  EXPECT_GT(t(AlgorithmId::recursive_doubling, K::allreduce, 16, 1e9, g), t(AlgorithmId::ring, K::allreduce, 16, 1e9, g));
  EXPECT_STREQ(predict(AlgorithmId::ring, K::allreduce, 16, 1e9, g)->bound(), "β-bound");
  const Best small = best_flat(K::allreduce, 16, 8, g), large = best_flat(K::allreduce, 16, 1e9, g);
  EXPECT_NE(small.algorithm, AlgorithmId::ring);
  EXPECT_NE(large.algorithm, AlgorithmId::recursive_doubling);
}

// 2 regions x 4 hosts x 8 ranks: fast host and region links, a 200 Mbit/s WAN 25 ms away.
std::vector<LevelCost> two_region_levels() {
  return {LevelCost{Level::host, 8, figures(2e-6, 1 / 20e9, 1e-10)},
          LevelCost{Level::rack, 4, figures(1e-5, 1 / 12.5e9, 1e-10)},
          LevelCost{Level::region, 2, figures(25e-3, 8 / 200e6, 1e-10)}};
}

TEST(CostModel, SplitRailBeatsFlatRingAcrossSlowWan) {
  const auto levels = two_region_levels();
  const GroupCost wan = levels.back().cost;
  for (double n : {4096.0, 1048576.0, 256.0 * 1048576}) {
    const double flat = t(AlgorithmId::ring, K::allreduce, 64, n, wan);
    const double split = predict_split_rail(K::allreduce, levels, n, 64 << 10).total();
    EXPECT_LT(split, flat) << "n=" << n;
    // The leader plan also beats the flat ring: 2 WAN hops against 126.
    EXPECT_LT(predict_leader(K::allreduce, levels, n).total(), flat) << "n=" << n;
  }
  // Large vectors: split rail sends 1/32 of the vector over each rank's WAN path, so it
  // beats the leaders' plan, whose cluster leaders carry all of it.
  const double n = 256.0 * (1 << 20);
  EXPECT_LT(predict_split_rail(K::allreduce, levels, n, 64 << 10).total(), predict_leader(K::allreduce, levels, n).total());
}

TEST(CostModel, SplitRailLevelsAddUp) {
  const auto levels = two_region_levels();
  const double n = 64.0 * (1 << 20);
  // Down: reduce-scatter (and allgather back) at 8 then 4 ranks, allreduce of N/32 at the
  // top, where two regions exchange their shards in one step: the ring's bytes, half its
  // rounds.
  Cost top = *predict(AlgorithmId::ring, K::allreduce, 2, n / 32, levels[2].cost);
  top.alpha /= 2;
  const double want = t(AlgorithmId::ring, K::reduce_scatter, 8, n, levels[0].cost) +
                      t(AlgorithmId::ring, K::allgather, 8, n, levels[0].cost) +
                      t(AlgorithmId::ring, K::reduce_scatter, 4, n / 8, levels[1].cost) +
                      t(AlgorithmId::ring, K::allgather, 4, n / 8, levels[1].cost) + top.total();
  EXPECT_DOUBLE_EQ(predict_split_rail(K::allreduce, levels, n, 64 << 10).total(), want);
}

// A lossy WAN path: a message meets a hole with probability 1 - (1 - loss)^packets, and
// a hole costs its stream about 1.25 round trips; what is sent again adds to the bytes.
TEST(CostModel, LossPricesEachMessagesHoles) {
  LinkCost clean{0.025, 8 / 1e9, 20e-6};
  EXPECT_EQ(priced_with_loss(clean, 1 << 20), clean) << "a loss-free link is priced as it was";
  LinkCost lossy = clean;
  lossy.loss = 0.01;
  const LinkCost big = priced_with_loss(lossy, 1 << 20), small = priced_with_loss(lossy, 1000);
  // 1 MiB is 725 segments: nearly sure to meet a loss; one segment meets it one time in a hundred.
  EXPECT_NEAR(big.alpha, 0.025 * (1 + 2.5 * (1 - std::pow(0.99, 725))), 1e-12);
  EXPECT_NEAR(small.alpha, 0.025 * (1 + 2.5 * 0.01), 1e-12);
  EXPECT_NEAR(big.beta, 8 / 1e9 / 0.99, 1e-20);
  EXPECT_EQ(big.gap, clean.gap);
  // The selector's flat predictions pay it: an exchange round across a lossy WAN costs more.
  GroupCost g;
  g.link = clean;
  const double before = predict(AlgorithmId::exchange, K::allreduce, 3, 16 << 10, g)->total();
  g.link = lossy;
  EXPECT_GT(predict(AlgorithmId::exchange, K::allreduce, 3, 16 << 10, g)->total(), before);
}

// A lossy allreduce's exchange: gathering costs one round and p - 1 encodings per member,
// reduce-scatter two rounds and 2(p - 1)/p of one. Across a WAN 40 ms away at 10 Gbit/s
// the round is worth more than the bytes of any gradient bucket; behind a 150 Mbit/s
// link a few hundred microseconds away the bytes win from small encodings on.
TEST(CostModel, CompressedExchangeTradesARoundForBytes) {
  using E = collectives::EncodedExchange;
  collectives::EncodedShape s;
  s.dense_bytes = 64.0 * (1 << 20);
  s.encoded_bytes = s.dense_bytes / 174;  // top-k 1% + int8
  s.encode_passes = 2.5;
  s.decode_passes = 0.09;
  const GroupCost far = figures(40e-3, 8 / 10e9, 1e-10), shaped = figures(300e-6, 8 / 150e6, 1e-10);
  for (int p : {3, 4, 8}) {
    const auto g = predict_compressed(E::gather, p, s, shaped), r = predict_compressed(E::reduce_scatter, p, s, shaped);
    EXPECT_NEAR(g.beta, (p - 1) * s.encoded_bytes * 8 / 150e6, 1e-12);
    EXPECT_NEAR(r.beta, 2.0 * (p - 1) / p * s.encoded_bytes * 8 / 150e6, 1e-12);
    EXPECT_NEAR(r.alpha, 2 * g.alpha, 1e-15);
    EXPECT_EQ(best_exchange(p, s, far), E::gather) << "p=" << p;
    EXPECT_EQ(best_exchange(p, s, shaped), E::reduce_scatter) << "p=" << p;
  }
  // Two members: one exchange either way.
  EXPECT_EQ(best_exchange(2, s, shaped), E::gather);
  EXPECT_DOUBLE_EQ(predict_compressed(E::gather, 2, s, shaped).total(),
                   predict_compressed(E::reduce_scatter, 2, s, shaped).total());
  // Small encodings gather even behind the slow link, and rails sharing the link move
  // the crossing down: it falls with the bandwidth each member gets.
  collectives::EncodedShape small = s;
  small.dense_bytes = 64 << 10;
  small.encoded_bytes = small.dense_bytes / 174;
  EXPECT_EQ(best_exchange(4, small, shaped), E::gather);
  auto crossing = [&](double sharing) {
    collectives::EncodedShape v = s;
    v.sharing = sharing;
    for (double n = 1024; n < 1e10; n *= 1.25) {
      v.dense_bytes = n;
      v.encoded_bytes = n / 174;
      if (best_exchange(4, v, shaped) == E::reduce_scatter) return n;
    }
    return 0.0;
  };
  EXPECT_GT(crossing(1), 0);
  EXPECT_LT(crossing(4), crossing(1) / 2);
}

TEST(CostModel, ClassifiesGroups) {
  const Locality a{"us", "c", "r", "h1", 0}, b{"us", "c", "r", "h1", 1}, c{"us", "c", "r", "h2", 0},
      d{"eu", "c", "r", "h1", 0};
  EXPECT_EQ(classify({a, b}), LinkClass::shm);
  EXPECT_EQ(classify({a, b, c}), LinkClass::net);
  EXPECT_EQ(classify({a, d}), LinkClass::wan);
  EXPECT_EQ(level_class(Level::host), LinkClass::shm);
  EXPECT_EQ(level_class(Level::cluster), LinkClass::net);
  EXPECT_EQ(level_class(Level::region), LinkClass::wan);
}

TEST(CostModel, BuiltInTableIsComplete) {
  const Figures f = default_figures();
  for (int c = 0; c < kLinkClasses; ++c) {
    EXPECT_GT(f.link[c].cost.alpha, 0);
    EXPECT_GT(f.link[c].cost.beta, 0);
    EXPECT_EQ(f.link[c].source, Source::builtin);
  }
  // Slower the further out: latency grows from the host to the WAN.
  EXPECT_LT(f.of(LinkClass::shm).cost.alpha, f.of(LinkClass::net).cost.alpha);
  EXPECT_LT(f.of(LinkClass::net).cost.alpha, f.of(LinkClass::wan).cost.alpha);
  EXPECT_GT(f.gamma, 0);
}

TEST(CostModel, ProbeRecordsRoundTripExactly) {
  Measured m;
  m.gamma = 1.0 / 3e10;
  PairResult p;
  p.pair = ProbePair{LinkClass::wan, 0, 4, 0, 1};
  p.cost = LinkCost{0.1 / 3, 1.0 / 7e9};
  p.beta_measured = true;
  p.small_iters = 3;
  p.large_iters = 1;
  m.pairs.push_back(p);
  const auto back = parse_measured(serialize(m));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->gamma, m.gamma);  // bit for bit: every rank must rank algorithms alike
  ASSERT_EQ(back->pairs.size(), 1u);
  EXPECT_EQ(back->pairs[0].cost, p.cost);
  EXPECT_EQ(back->pairs[0].pair.cls, LinkClass::wan);
  EXPECT_FALSE(parse_measured("gamma x").has_value());
  EXPECT_FALSE(parse_measured("pair shm 0 1").has_value());
  // A pair's loss travels too (records without one, written before it existed, still read).
  m.pairs[0].cost.loss = 0.012;
  const auto lossy = parse_measured(serialize(m) + serialize(Measured{m.gamma, {p}}).substr(serialize(m).find("pair")));
  ASSERT_TRUE(lossy.has_value());
  ASSERT_EQ(lossy->pairs.size(), 2u);
  EXPECT_EQ(lossy->pairs[0].cost.loss, 0.012);
  EXPECT_EQ(lossy->pairs[1].cost.loss, 0);
  EXPECT_FALSE(parse_measured(serialize(m).replace(serialize(m).find("loss ") + 5, 5, "1.5")).has_value())
      << "a loss of 150% is a malformed record";
}

// A shrunk or grown communicator takes its parent's figures for the pairs it would probe,
// its regions renumbered; a pair the parent never measured (a region it did not have)
// means probing again.
TEST(CostModel, ParentFiguresCarryOverByRegionName) {
  Measured parent;
  parent.gamma = 1e-10;
  PairResult shm, ab, ac;
  shm.pair = ProbePair{LinkClass::shm, 0, 1};
  shm.cost = LinkCost{3e-6, 1e-10};
  ab.pair = ProbePair{LinkClass::wan, 0, 2, 0, 1};
  ab.cost = LinkCost{0.01, 1e-8};
  ac.pair = ProbePair{LinkClass::wan, 0, 4, 0, 2};
  ac.cost = LinkCost{0.04, 2e-8};
  parent.pairs = {shm, ab, ac};
  const std::vector<std::string> from{"a", "b", "c"};
  // Region "a" lost every rank: the child's regions are c, b (in the order of their lowest rank).
  const std::vector<ProbePair> needed{ProbePair{LinkClass::shm, 0, 1}, ProbePair{LinkClass::wan, 0, 2, 0, 1}};
  const std::vector<std::string> to{"c", "b"};
  EXPECT_FALSE(carry_over(parent, from, needed, to).has_value()) << "the parent never measured b <-> c";
  PairResult bc;
  bc.pair = ProbePair{LinkClass::wan, 2, 4, 1, 2};
  bc.cost = LinkCost{0.08, 3e-8};
  bc.beta_measured = true;
  parent.pairs.push_back(bc);
  const auto child = carry_over(parent, from, needed, to);
  ASSERT_TRUE(child.has_value());
  Figures f = default_figures();
  set_regions(f, to);
  apply_measured(f, *child, Source::probed);
  EXPECT_EQ(f.wan_pair("b", "c").alpha, 0.08);
  EXPECT_EQ(f.wan_pair("c", "b").beta, 3e-8);
  EXPECT_EQ(f.of(LinkClass::shm).cost.alpha, 3e-6);
}

TEST(CostModel, TopologyFileFiguresWinOverProbes) {
  Figures f = default_figures();
  set_regions(f, {"us-east", "eu-west"});
  Measured m;
  m.gamma = 2e-10;
  PairResult shm, wan;
  shm.pair = ProbePair{LinkClass::shm, 0, 1};
  shm.cost = LinkCost{3e-6, 1e-10};
  shm.beta_measured = true;
  wan.pair = ProbePair{LinkClass::wan, 0, 4, 0, 1};
  wan.cost = LinkCost{0.02, 1e-8};
  wan.beta_measured = true;
  m.pairs = {shm, wan};
  apply_measured(f, m, Source::probed);
  EXPECT_EQ(f.of(LinkClass::shm).source, Source::probed);
  EXPECT_EQ(f.wan_pair("us-east", "eu-west").alpha, wan.cost.alpha);
  EXPECT_EQ(f.wan_pair("eu-west", "us-east").beta, wan.cost.beta);  // a round trip is both ways
  EXPECT_EQ(f.wan_pair("us-east", "eu-west").gap, default_figures().of(LinkClass::wan).cost.gap);  // no burst ran
  EXPECT_EQ(f.gamma, 2e-10);

  const auto file = parse_topology(
      "host { latency_us: 1 bandwidth_gbps: 400 }\n"
      "wan { from_region: \"us-east\" to_region: \"eu-west\" latency_ms: 25 bandwidth_mbps: 200 }\n",
      "test.textproto");
  apply_file(f, file);
  EXPECT_EQ(f.of(LinkClass::shm).source, Source::file);
  EXPECT_DOUBLE_EQ(f.of(LinkClass::shm).cost.alpha, 1e-6);
  EXPECT_DOUBLE_EQ(f.of(LinkClass::shm).cost.beta, 8 / 400e9);
  EXPECT_DOUBLE_EQ(f.wan_pair("us-east", "eu-west").alpha, 0.025);
  EXPECT_DOUBLE_EQ(f.wan_pair("eu-west", "us-east").beta, 8 / 200e6);  // mirrored
  EXPECT_DOUBLE_EQ(f.wan_worst({"us-east", "eu-west"}).alpha, 0.025);
  EXPECT_EQ(f.wan_worst({"us-east", "eu-west"}).loss, 0);
  const auto lossy = parse_topology(
      "wan { from_region: \"us-east\" to_region: \"eu-west\" latency_ms: 25 bandwidth_mbps: 200 loss_percent: 1.5 }\n",
      "lossy.textproto");
  apply_file(f, lossy);
  EXPECT_DOUBLE_EQ(f.wan_pair("eu-west", "us-east").loss, 0.015);
  EXPECT_DOUBLE_EQ(f.wan_worst({"us-east", "eu-west"}).loss, 0.015);
  // What the file does not name keeps its probed figure.
  EXPECT_EQ(f.gamma, 2e-10);
}

TEST(CostModel, ProbePairsStandForEachClass) {
  // 2 regions x 2 hosts x 2 ranks.
  std::vector<Locality> ls;
  for (int r = 0; r < 8; ++r)
    ls.push_back(Locality{r < 4 ? "us" : "eu", "", "", std::string(r < 4 ? "us" : "eu") + std::to_string(r / 2), 0});
  const auto pairs = probe_pairs(ls);
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0].cls, LinkClass::shm);
  EXPECT_EQ(pairs[0].from, 0);
  EXPECT_EQ(pairs[0].to, 1);
  EXPECT_EQ(pairs[1].cls, LinkClass::net);
  EXPECT_EQ(pairs[1].to, 2);
  EXPECT_EQ(pairs[2].cls, LinkClass::wan);
  EXPECT_EQ(pairs[2].to, 4);
  // One rank per host, one region: only the network pair.
  const auto flat = probe_pairs(synthesize_uniform(1, 3, 1));
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].cls, LinkClass::net);
  // Many regions: region 0 to each other one only, within the time bound.
  EXPECT_EQ(probe_pairs(synthesize_uniform(20, 1, 1)).size(), 19u);
  EXPECT_EQ(probe_pairs(synthesize_uniform(5, 1, 1)).size(), 10u);
}

}  // namespace
}  // namespace strata::topology
