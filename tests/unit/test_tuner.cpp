// The online tuner (topology/tuner.hpp): its schedule of candidates, what it offers for
// agreement, the winner it keeps, and where it has no say.
#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "collectives/registry.hpp"
#include "one_host.hpp"
#include "strata/errors.hpp"
#include "topology/tuner.hpp"

namespace strata::topology {
namespace {

using K = CollectiveKind;

struct Fixture {
  Selector sel;
  collectives::Group world;
  explicit Fixture(AlgorithmRules rules = {}) : sel(shm_figures(), one_host(3), std::move(rules)) {
    world = collectives::Group::world(0, 3);
    sel.add_group(world);
  }
};

// Runs the exploration of one bucket (4096 floats) to its end: `took(algorithm, untimed)`
// says how long each call lasted, untimed for the first call of a streak. Returns every
// call's algorithm in order; each call starts 10 s after the previous one.
template <class Took>
std::vector<collectives::AlgorithmId> explore_all(Tuner& t, const collectives::Group& world, Took took) {
  const std::size_t count = 4096;
  const auto bytes = message_bytes(K::allreduce, count, DataType::f32, world.size());
  std::vector<collectives::AlgorithmId> calls;
  while (!t.offer(K::allreduce, bytes)) {
    const auto* a = calls.size() < 100 ? t.next(K::allreduce, DataType::f32, count, world) : nullptr;
    if (!a) {
      ADD_FAILURE() << "no candidate, or never offered, after " << calls.size() << " calls";
      break;
    }
    const bool untimed = calls.empty() || calls.back() != a->id;
    const double start = 10.0 * static_cast<double>(calls.size());
    calls.push_back(a->id);
    t.record(K::allreduce, bytes, start, start + took(a->id, untimed));
  }
  return calls;
}

const auto kBucket = message_bytes(K::allreduce, 4096, DataType::f32, 3);

Tuner::Options streaks_of(int streak, int samples) {
  Tuner::Options o;
  o.samples = samples;
  o.streak = streak;
  return o;
}

// A candidate's time is the mean of its faster half of calls: each call is timed from its
// last rank's start, so what the algorithm costs is in all of them, and the slow half is
// the host's (a rank descheduled while the others wait).
TEST(Tuner, JudgesByTheFasterHalfOfTheCalls) {
  Fixture fx;
  const auto o = streaks_of(2, 4);
  Tuner t(fx.sel, o);
  const double tail[] = {1e-3, 9e-3, 2e-3, 100e-3};  // the model's pick's timed calls
  std::size_t n = 0;
  std::optional<collectives::AlgorithmId> pick;  // it leads
  explore_all(t, fx.world, [&](collectives::AlgorithmId id, bool untimed) {
    if (!pick) pick = id;
    return untimed ? 1.0 : id != *pick ? 3e-3 : n < 4 ? tail[n++] : 1.0;
  });
  ASSERT_EQ(n, 4u);
  const auto mine = t.judge(K::allreduce, kBucket, {*t.offer(K::allreduce, kBucket)});
  ASSERT_GE(mine.size(), 2u);
  // Times are differences of clock readings: equal to a nanosecond.
  EXPECT_NEAR(mine[0], 1.5e-3, 1e-9);  // (1 + 2) / 2 ms: the mean (28 ms) would be the 100's
  EXPECT_NEAR(mine[1], 3e-3, 1e-9);
}

// Each candidate runs in streaks: an untimed call after every switch (it pays for how
// unevenly the previous algorithm let the ranks go), then timed calls in a row, the
// candidates taking turns until each has its samples.
TEST(Tuner, TimesEachCandidateInStreaksAfterAnUntimedCall) {
  Fixture fx;
  const auto o = streaks_of(2, 5);
  Tuner t(fx.sel, o);
  // Untimed calls take 1 s; any of them counted shows.
  const auto calls = explore_all(t, fx.world, [](collectives::AlgorithmId, bool untimed) { return untimed ? 1.0 : 1e-3; });
  std::vector<collectives::AlgorithmId> streaks;  // one entry per run of one candidate
  std::vector<int> lengths;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (i == 0 || calls[i] != calls[i - 1]) {
      streaks.push_back(calls[i]);
      lengths.push_back(0);
    }
    ++lengths.back();
  }
  const auto k = std::set<collectives::AlgorithmId>(calls.begin(), calls.end()).size();
  ASSERT_GE(k, 2u);
  // Rounds of 2, 2 and 1 timed calls: three streaks per candidate, in the same order each round.
  ASSERT_EQ(streaks.size(), 3 * k);
  EXPECT_EQ(calls.size(), k * static_cast<std::size_t>(Tuner::calls_per_candidate(o)));
  for (std::size_t s = 0; s < streaks.size(); ++s) {
    EXPECT_EQ(streaks[s], streaks[s % k]) << "streak " << s;
    EXPECT_EQ(lengths[s], s < 2 * k ? 3 : 2) << "streak " << s;
  }
  const auto mine = t.judge(K::allreduce, kBucket, {*t.offer(K::allreduce, kBucket)});
  ASSERT_EQ(mine.size(), k);
  for (double x : mine) EXPECT_NEAR(x, 1e-3, 1e-9);  // no untimed call counted
  Tuner::Options bad;
  bad.streak = 0;
  EXPECT_THROW(Tuner(fx.sel, bad), InvalidArgument);
}

// A call costs what passes from its last rank's start to its last rank's end: not any
// one rank's own start-to-end, which is mostly waiting for the others (the early ranks)
// or skips the hop that carries its data to them (the last).
TEST(Tuner, JudgesEachCallFromItsLastStartToItsLastEnd) {
  Fixture fx;
  const auto o = streaks_of(2, 2);
  Tuner t(fx.sel, o);
  const auto calls = explore_all(t, fx.world, [](collectives::AlgorithmId, bool) { return 1.0; });
  std::vector<collectives::AlgorithmId> timed;  // the candidate of each timed call
  for (std::size_t i = 1; i < calls.size(); ++i)
    if (calls[i] == calls[i - 1]) timed.push_back(calls[i]);
  ASSERT_FALSE(timed.empty());
  const auto first = timed.front();
  // Three ranks' clocks, already on one: rank 0 waits 5 s a call, rank 1 starts 4 s
  // later and ends 1.5 s after that, rank 2 ends last at 6 s, or at 9 s in calls of the
  // first candidate.
  std::vector<std::vector<double>> offers(3);
  for (std::size_t j = 0; j < timed.size(); ++j) {
    const double at = 10.0 * static_cast<double>(j);
    offers[0].insert(offers[0].end(), {at, at + 5});
    offers[1].insert(offers[1].end(), {at + 4, at + 5.5});
    offers[2].insert(offers[2].end(), {at + 1, at + (timed[j] == first ? 9 : 6)});
  }
  const auto times = t.judge(K::allreduce, kBucket, offers);
  ASSERT_EQ(times.size(), t.candidates(K::allreduce, kBucket));
  EXPECT_DOUBLE_EQ(times[0], 5.0);  // the model's pick leads: 9 - 4
  for (std::size_t c = 1; c < times.size(); ++c) EXPECT_DOUBLE_EQ(times[c], 2.0) << c;  // 6 - 4
  offers[2].pop_back();
  EXPECT_THROW(t.judge(K::allreduce, kBucket, offers), InvalidArgument);
}

TEST(Tuner, TriesTheCloseCandidatesThenKeepsTheFastest) {
  Fixture fx;
  Tuner::Options o;
  o.samples = 3;
  Tuner t(fx.sel, o);
  const std::size_t count = 4096;  // 16 KiB of f32
  const auto bytes = message_bytes(K::allreduce, count, DataType::f32, 3);
  const auto ranked = fx.sel.ranking(K::allreduce, DataType::f32, count, fx.world);
  ASSERT_GE(ranked.size(), 2u);

  std::vector<collectives::AlgorithmId> seen;
  const collectives::Algorithm* first = t.next(K::allreduce, DataType::f32, count, fx.world);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->id, ranked.front().algorithm);  // the model's pick leads
  seen.push_back(first->id);
  t.record(K::allreduce, bytes, 0, 1.0);  // warm-up: not counted
  int calls = 1;
  while (!t.offer(K::allreduce, bytes)) {
    const auto* a = t.next(K::allreduce, DataType::f32, count, fx.world);
    ASSERT_NE(a, nullptr);
    ASSERT_LT(++calls, 100) << "never offered";
    if (std::find(seen.begin(), seen.end(), a->id) == seen.end()) seen.push_back(a->id);
    t.record(K::allreduce, bytes, 0, 1e-3);
  }
  const int k = static_cast<int>(seen.size());
  ASSERT_GE(k, 2);
  EXPECT_EQ(calls, k * (o.samples + 1));  // one streak each: an untimed call, then the samples
  const auto mine = t.judge(K::allreduce, bytes, {*t.offer(K::allreduce, bytes)});
  ASSERT_EQ(mine.size(), seen.size());
  EXPECT_DOUBLE_EQ(mine[0], 1e-3);  // the warm-up's 1.0 was dropped
  // What the ranks agree on decides, not this rank's own view.
  std::vector<double> summed(mine.size(), 3e-3);
  summed[1] = 1e-3;
  t.settle(K::allreduce, bytes, summed);
  EXPECT_FALSE(t.offer(K::allreduce, bytes));
  EXPECT_EQ(t.settled(), 1);
  for (int i = 0; i < 5; ++i) {
    const auto* a = t.next(K::allreduce, DataType::f32, count, fx.world);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->id, seen[1]);
  }
  // Within 10% of the model's pick is noise: the pick stays.
  const auto other = message_bytes(K::allreduce, 100, DataType::f32, 3);
  Tuner::Options quick;
  quick.samples = 1;
  Tuner close(fx.sel, quick);
  int n = 0;
  while (!close.offer(K::allreduce, other) && n++ < 100) {
    ASSERT_NE(close.next(K::allreduce, DataType::f32, 100, fx.world), nullptr);
    close.record(K::allreduce, other, 0, 1e-3);
  }
  ASSERT_TRUE(close.offer(K::allreduce, other));
  std::vector<double> near(close.candidates(K::allreduce, other), 1e-3);
  near.back() = 0.95e-3;
  close.settle(K::allreduce, other, near);
  EXPECT_EQ(close.next(K::allreduce, DataType::f32, 100, fx.world)->id,
            fx.sel.ranking(K::allreduce, DataType::f32, 100, fx.world).front().algorithm);
  EXPECT_EQ(close.report().find("slower"), std::string::npos) << close.report();

  const std::string report = t.report();
  EXPECT_NE(report.find("(picked)"), std::string::npos) << report;
  EXPECT_NE(report.find("the model's pick was 3.00x slower"), std::string::npos) << report;
  // Another size is another bucket, still exploring.
  EXPECT_EQ(t.next(K::allreduce, DataType::f32, 1 << 20, fx.world)->id,
            fx.sel.ranking(K::allreduce, DataType::f32, 1 << 20, fx.world).front().algorithm);
  EXPECT_NE(t.report().find("exploring (1 of"), std::string::npos) << t.report();
}

// Where the model predicts several algorithms alike (2 ranks, a large vector: ring,
// halving-doubling and direct move the same bytes in the same steps), all of them are
// tried, not just the first max_candidates of an order the model cannot justify.
TEST(Tuner, TriesEveryAlgorithmTheModelCannotTellApart) {
  Selector sel(shm_figures(), one_host(2), AlgorithmRules{});
  const auto world = collectives::Group::world(0, 2);
  sel.add_group(world);
  const std::size_t count = std::size_t{16} << 20;  // 64 MiB of f32
  const auto ranked = sel.ranking(K::allreduce, DataType::f32, count, world);
  std::vector<collectives::AlgorithmId> tied;
  for (const auto& s : ranked)
    if (s.cost.total() <= 1.05 * ranked.front().cost.total()) tied.push_back(s.algorithm);
  ASSERT_GT(tied.size(), 3u) << "the model no longer ties these; pick another case";

  Tuner::Options o;
  o.samples = 1;
  Tuner t(sel, o);
  const auto bytes = message_bytes(K::allreduce, count, DataType::f32, 2);
  std::vector<collectives::AlgorithmId> seen;
  for (int calls = 0; !t.offer(K::allreduce, bytes); ++calls) {
    ASSERT_LT(calls, 100) << "never offered";
    const auto* a = t.next(K::allreduce, DataType::f32, count, world);
    ASSERT_NE(a, nullptr);
    if (std::find(seen.begin(), seen.end(), a->id) == seen.end()) seen.push_back(a->id);
    t.record(K::allreduce, bytes, 0, 1e-3);
  }
  for (auto id : tied)
    EXPECT_NE(std::find(seen.begin(), seen.end(), id), seen.end()) << collectives::algorithm(id).name << " never tried";

  Tuner::Options bad;
  bad.tie = 0.5;
  EXPECT_THROW(Tuner(sel, bad), InvalidArgument);
}

// Every algorithm the tuner explores for one bucket, in the order it first ran them.
std::vector<collectives::AlgorithmId> explored(const Selector& sel, const collectives::Group& world, Tuner::Options o,
                                               std::size_t count) {
  o.samples = 1;
  Tuner t(sel, o);
  const auto bytes = message_bytes(K::allreduce, count, DataType::f32, world.size());
  std::vector<collectives::AlgorithmId> seen;
  for (int calls = 0; !t.offer(K::allreduce, bytes) && calls < 100; ++calls) {
    const auto* a = t.next(K::allreduce, DataType::f32, count, world);
    if (!a) break;
    if (std::find(seen.begin(), seen.end(), a->id) == seen.end()) seen.push_back(a->id);
    t.record(K::allreduce, bytes, 0, 1e-3);
  }
  return seen;
}

// The bad probe: a spinning ping-pong gave α = 0.4 µs where a collective's step
// costs tens. The model then ranks many-round algorithms first, and the one-round ones
// it would pick at the real α fall outside its top three; they are tried all the same.
TEST(Tuner, TriesWhatTheModelWouldPickWereAlphaTenTimesOff) {
  Figures f = shm_figures();
  f.of(LinkClass::shm).cost.alpha = 0.4e-6;
  int mattered = 0;
  for (int p : {3, 4, 8}) {
    Selector sel(f, one_host(p), AlgorithmRules{});
    const auto world = collectives::Group::world(0, p);
    sel.add_group(world);
    for (std::size_t count = 16; count <= (std::size_t{1} << 20); count *= 4) {
      const auto ranked = sel.ranking(K::allreduce, DataType::f32, count, world);
      auto pick_at = [&](double scale) {
        auto cost = [&](const auto& s) { return scale * s.cost.alpha + s.cost.beta + s.cost.gamma; };
        return std::min_element(ranked.begin(), ranked.end(),
                                [&](const auto& x, const auto& y) { return cost(x) < cost(y); })->algorithm;
      };
      Tuner::Options trusting;
      trusting.alpha_doubt = 1;
      const auto without = explored(sel, world, trusting, count);
      const auto with = explored(sel, world, {}, count);
      for (const double scale : {10.0, 0.1}) {
        const auto id = pick_at(scale);
        EXPECT_NE(std::find(with.begin(), with.end(), id), with.end())
            << collectives::algorithm(id).name << " never tried; " << p << " ranks, " << count << " floats";
        mattered += std::find(without.begin(), without.end(), id) == without.end() ? 1 : 0;
      }
    }
  }
  EXPECT_GT(mattered, 0) << "the model's close picks held every such algorithm already: nothing shows the rule";
  Tuner::Options bad;
  bad.alpha_doubt = 0.5;
  EXPECT_THROW(Tuner(Selector(f, one_host(3), AlgorithmRules{}), bad), InvalidArgument);
}

TEST(Tuner, RulesAndLoneCandidatesAreLeftAlone) {
  Fixture ruled(parse_algorithm_rules("allreduce:ring", "STRATA_ALGO", true));
  Tuner t(ruled.sel, {});
  EXPECT_EQ(t.next(K::allreduce, DataType::f32, 100, ruled.world), nullptr);
  t.record(K::allreduce, 400, 0, 1.0);
  EXPECT_FALSE(t.offer(K::allreduce, 400));

  Fixture fx;
  Tuner::Options one;
  one.max_candidates = 1;
  one.tie = 1.0;
  one.alpha_doubt = 1.0;
  Tuner lone(fx.sel, one);
  EXPECT_EQ(lone.next(K::allreduce, DataType::f32, 100, fx.world), nullptr);
  EXPECT_EQ(lone.report(), "");

  Tuner::Options none;
  none.samples = 0;
  EXPECT_THROW(Tuner(fx.sel, none), InvalidArgument);
}

}  // namespace
}  // namespace strata::topology
