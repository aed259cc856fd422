// One plan per call (core/call_plan.hpp): the route, the algorithm the fingerprint
// declares and the one that runs are settled in one place; the tuner's trial is part of
// the plan, never decided later.
#include <gtest/gtest.h>

#include "collectives/registry.hpp"
#include "core/call_plan.hpp"
#include "one_host.hpp"
#include "strata/errors.hpp"

namespace strata::detail {
namespace {

using K = CollectiveKind;

struct Fixture {
  topology::Selector sel{topology::shm_figures(), topology::one_host(3), {}};
  collectives::Group world = collectives::Group::world(0, 3);
  Fixture() { sel.add_group(world); }
  PlanInputs in(topology::Tuner* tuner = nullptr) { return PlanInputs{&sel, tuner, nullptr, &world}; }
};

collectives::CollArgs allreduce(std::size_t count) {
  collectives::CollArgs a;
  a.kind = K::allreduce;
  a.count = count;
  a.dtype = DataType::f32;
  return a;
}

TEST(CallPlan, AFlatCallDeclaresTheSelectorsPickAndRunsIt) {
  Fixture f;
  const auto a = allreduce(1 << 20);
  const auto p = settle_plan(f.in(), a, "allreduce #0");
  EXPECT_EQ(p.route, CallPlan::Route::flat);
  ASSERT_NE(p.algorithm, nullptr);
  EXPECT_EQ(p.algorithm, &f.sel.choose(f.world, a));
  EXPECT_EQ(p.declared, p.algorithm);
  EXPECT_EQ(p.fingerprint_id(), static_cast<int>(p.algorithm->id) + 1);
  EXPECT_FALSE(p.tuned);
}

TEST(CallPlan, ANamedAlgorithmIsDeclaredAndNeverTuned) {
  Fixture f;
  topology::Tuner tuner(f.sel, {});
  auto a = allreduce(4096);
  a.algorithm = &collectives::algorithm(collectives::AlgorithmId::ring);
  const auto p = settle_plan(f.in(&tuner), a, "allreduce #0");
  EXPECT_EQ(p.declared, a.algorithm);
  EXPECT_EQ(p.algorithm, a.algorithm);
  EXPECT_FALSE(p.tuned);
}

TEST(CallPlan, TheTunersTrialIsInThePlanWhileTheFingerprintKeepsTheSelectorsPick) {
  Fixture f;
  topology::Tuner tuner(f.sel, {});
  const auto a = allreduce(4096);
  const auto p = settle_plan(f.in(&tuner), a, "allreduce #0");
  EXPECT_TRUE(p.tuned);
  EXPECT_EQ(p.declared, &f.sel.choose(f.world, a));
  ASSERT_NE(p.algorithm, nullptr);
  EXPECT_TRUE(p.algorithm->supports(a.kind, a.dtype, a.count, f.world.shape()));
}

TEST(CallPlan, AlltoallAndCompressionEverywhereTakeTheirOwnAlgorithms) {
  Fixture f;
  collectives::CollArgs a;
  a.kind = K::alltoall;
  EXPECT_EQ(settle_plan(f.in(), a, "alltoall #0").route, CallPlan::Route::pairwise);
  auto c = allreduce(100);
  c.compression = Compression::parse("topk:0.01+int8");
  c.compression->scope = Compression::Scope::everywhere;
  const auto p = settle_plan(f.in(), c, "allreduce #1");
  EXPECT_EQ(p.route, CallPlan::Route::flat);
  ASSERT_NE(p.algorithm, nullptr);
  EXPECT_EQ(p.algorithm->id, collectives::AlgorithmId::compressed);
  EXPECT_FALSE(p.tuned);
  EXPECT_EQ(p.fingerprint_id(), 0);
  // Never chosen, nor nameable, for a plain call.
  EXPECT_FALSE(p.algorithm->supports(c.kind, c.dtype, c.count, f.world.shape()));
}

TEST(CallPlan, AnAlgorithmThatCannotRunTheCallIsRefusedNamingIt) {
  Fixture f;
  auto a = allreduce(10);
  a.kind = K::barrier;
  a.algorithm = &collectives::algorithm(collectives::AlgorithmId::ring);
  try {
    settle_plan(f.in(), a, "barrier #3");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("barrier #3: algorithm ring does not support it"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace strata::detail
