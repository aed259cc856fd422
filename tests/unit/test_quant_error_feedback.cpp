// Error feedback: conservation over many steps, shard bookkeeping, reset, snapshots.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/codec.hpp"
#include "quant/error_feedback.hpp"
#include "strata/errors.hpp"

namespace {

namespace q = strata::quant;
using strata::InvalidArgument;

std::vector<float> normal(std::size_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

// What a rank does each step: compensate, encode, decode its own message, update.
std::vector<float> step(q::ErrorFeedback& ef, const q::Codec& c, const std::string& key,
                        q::Shard shard, std::vector<float> data, std::uint64_t seed) {
  ef.compensate(key, shard, data);
  std::vector<std::byte> wire;
  c.encode(data, wire, seed);
  std::vector<float> decoded(data.size());
  c.decode(wire, decoded);
  ef.update(key, shard, data, decoded);
  return decoded;
}

// Nothing is lost: sum of what was delivered + what is still held == sum of the inputs.
// Each step rounds twice per element (data = g + r, and r' = data - decoded), each by at
// most half an ulp of the largest |data| seen, so after T steps the two sides differ by at
// most T * 2^-24 * max|data| per element; the test allows twice that.
TEST(QuantErrorFeedback, DeliveriesPlusResidualEqualInputs) {
  constexpr int kSteps = 50;
  constexpr std::size_t n = 20000;
  for (const char* spec : {"topk:0.01+int8", "topk:0.05,exact", "topk:0.01+int4,stochastic",
                           "int4", "fp16", "topk:0.3+bf16"}) {
    const auto c = q::make_codec(spec);
    q::ErrorFeedback ef;
    std::mt19937 rng(1);
    const q::Shard shard{1000, n};
    std::vector<double> inputs(n, 0.0), delivered(n, 0.0);
    double max_data = 0;
    for (int t = 0; t < kSteps; ++t) {
      const auto g = normal(n, rng);
      for (std::size_t i = 0; i < n; ++i) inputs[i] += g[i];
      auto data = g;
      ef.compensate("w", shard, data);
      for (float v : data) max_data = std::max(max_data, static_cast<double>(std::fabs(v)));
      const auto d = step(ef, *c, "w", shard, g, static_cast<std::uint64_t>(t));
      for (std::size_t i = 0; i < n; ++i) delivered[i] += d[i];
    }
    const auto r = ef.residual("w", shard);
    ASSERT_EQ(r.size(), n);
    const double tol = 2 * kSteps * std::ldexp(max_data, -24);
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(delivered[i] + r[i] - inputs[i]));
    EXPECT_LE(worst, tol) << spec;
    // The residual stays bounded: compression delays mass, it does not pile it up forever.
    double rmax = 0;
    for (float v : r) rmax = std::max(rmax, static_cast<double>(std::fabs(v)));
    EXPECT_LT(rmax, 50.0) << spec;
  }
}

TEST(QuantErrorFeedback, CompensateAddsTheStoredResidual) {
  q::ErrorFeedback ef;
  std::vector<float> data = {1, 2, 3};
  ef.compensate("a", {0, 3}, data);  // nothing stored yet
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3}));
  ef.update("a", {0, 3}, std::vector<float>{1, 2, 3}, std::vector<float>{1, 0, 2.5f});
  ef.compensate("a", {0, 3}, data);
  EXPECT_EQ(data, (std::vector<float>{1, 4, 3.5f}));
  EXPECT_EQ(ef.entries(), 1u);
  EXPECT_EQ(ef.residual_elements(), 3u);
  EXPECT_TRUE(ef.residual("a", {0, 4}).empty());
  EXPECT_TRUE(ef.residual("b", {0, 3}).empty());
}

TEST(QuantErrorFeedback, ShardsAreKeyedAndLayoutChangesAreRefused) {
  q::ErrorFeedback ef;
  const std::vector<float> ones(10, 1.0f), zeros(10, 0.0f);
  ef.update("a", {0, 10}, ones, zeros);
  ef.update("a", {10, 10}, ones, zeros);
  ef.update("b", {5, 10}, ones, zeros);  // other key, overlap irrelevant
  EXPECT_EQ(ef.entries(), 3u);
  std::vector<float> d(10, 0.0f);
  EXPECT_THROW(ef.compensate("a", {5, 10}, d), InvalidArgument);
  EXPECT_THROW(ef.update("a", {5, 10}, ones, zeros), InvalidArgument);
  EXPECT_THROW(ef.update("a", {0, 20}, std::vector<float>(20), std::vector<float>(20)), InvalidArgument);
  EXPECT_EQ(d, zeros);
  EXPECT_EQ(ef.entries(), 3u);
  std::vector<float> nine(9);
  EXPECT_THROW(ef.compensate("a", {0, 10}, nine), InvalidArgument);
  EXPECT_THROW(ef.update("a", {0, 10}, ones, std::vector<float>(9)), InvalidArgument);
  ef.reset("a");
  EXPECT_EQ(ef.entries(), 1u);
  EXPECT_NO_THROW(ef.update("a", {5, 10}, ones, zeros));
  ef.reset("missing");
  EXPECT_EQ(ef.entries(), 2u);
  ef.reset_all();
  EXPECT_EQ(ef.entries(), 0u);
  ef.compensate("a", {5, 10}, d);
  EXPECT_EQ(d, zeros);
}

q::ErrorFeedback populated() {
  q::ErrorFeedback ef;
  std::mt19937 rng(2);
  const auto c = q::make_codec("topk:0.1+int8");
  for (int t = 0; t < 3; ++t) {
    step(ef, *c, "layer1.weight", {0, 1000}, normal(1000, rng), 1);
    step(ef, *c, "layer1.weight", {1000, 999}, normal(999, rng), 2);
    step(ef, *c, "", {7, 1}, normal(1, rng), 3);
    step(ef, *c, "emb", {0, 4097}, normal(4097, rng), 4);
  }
  return ef;
}

void expect_same(const q::ErrorFeedback& a, const q::ErrorFeedback& b) {
  EXPECT_EQ(a.entries(), b.entries());
  EXPECT_EQ(a.residual_elements(), b.residual_elements());
  for (const auto& [key, shard] : {std::pair<std::string, q::Shard>{"layer1.weight", {0, 1000}},
                                   {"layer1.weight", {1000, 999}}, {"", {7, 1}}, {"emb", {0, 4097}}}) {
    const auto x = a.residual(key, shard);
    const auto y = b.residual(key, shard);
    ASSERT_EQ(x.size(), shard.length) << key;
    ASSERT_EQ(y.size(), shard.length) << key;
    EXPECT_EQ(0, std::memcmp(x.data(), y.data(), 4 * x.size())) << key;
  }
}

TEST(QuantErrorFeedback, SaveRestoreRoundTrip) {
  const auto ef = populated();
  const auto snap = ef.save();
  q::ErrorFeedback back;
  back.update("stale", {0, 2}, std::vector<float>{1, 1}, std::vector<float>{0, 0});
  back.restore(snap);
  expect_same(ef, back);
  EXPECT_TRUE(back.residual("stale", {0, 2}).empty());  // restore replaces everything
  EXPECT_EQ(back.save(), snap);

  q::ErrorFeedback empty;
  q::ErrorFeedback empty_back;
  empty_back.restore(empty.save());
  EXPECT_EQ(empty_back.entries(), 0u);
}

TEST(QuantErrorFeedback, RestoreRejectsDamageAndKeepsState) {
  const auto ef = populated();
  const auto snap = ef.save();
  q::ErrorFeedback target = populated();
  const auto before = target.save();
  const auto rejected = [&](const std::vector<std::byte>& b, const std::string& what) {
    EXPECT_THROW(target.restore(b), InvalidArgument) << what;
    EXPECT_EQ(target.save(), before) << what;
  };
  for (std::size_t len = 0; len < snap.size(); len += (len < 64 ? 1 : 97)) {
    rejected(std::vector<std::byte>(snap.begin(), snap.begin() + static_cast<std::ptrdiff_t>(len)),
             "truncated to " + std::to_string(len));
  }
  auto longer = snap;
  longer.push_back(std::byte{0});
  rejected(longer, "trailing byte");
  for (std::size_t at : {std::size_t{0}, std::size_t{4}, std::size_t{9}, std::size_t{30},
                         snap.size() / 2, snap.size() - 1}) {
    auto bad = snap;
    bad[at] ^= std::byte{0x10};
    rejected(bad, "flipped byte " + std::to_string(at));
  }
  try {
    auto v2 = snap;
    v2[4] = std::byte{2};
    target.restore(v2);
    ADD_FAILURE() << "accepted version 2";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("version 2"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// The sparse update (kept elements of a top-k buffer) stores exactly what the dense one
// does, and decode_sparse reports what decode writes.
TEST(QuantErrorFeedback, SparseUpdateMatchesDenseBitForBit) {
  std::mt19937 gen(11);
  std::normal_distribution<float> d;
  std::vector<float> x(10007);
  for (auto& v : x) v = d(gen);
  x[5] = -0.0f;
  const auto codec = q::make_codec("topk:0.02+int8");
  std::vector<std::byte> wire;
  codec->encode(x, wire);
  std::vector<float> dense(x.size());
  codec->decode(wire, dense);
  std::vector<std::uint32_t> idx;
  std::vector<float> values;
  ASSERT_TRUE(q::decode_sparse(wire, idx, values));
  ASSERT_EQ(idx.size(), values.size());
  for (std::size_t j = 0; j < idx.size(); ++j) EXPECT_EQ(dense[idx[j]], values[j]);

  q::ErrorFeedback a, b;
  const q::Shard shard{100, x.size()};
  a.update("k", shard, x, dense);
  b.update_sparse("k", shard, x, idx, values);
  const auto ra = a.residual("k", shard), rb = b.residual("k", shard);
  ASSERT_EQ(ra.size(), rb.size());
  EXPECT_EQ(std::memcmp(ra.data(), rb.data(), ra.size() * sizeof(float)), 0);

  EXPECT_FALSE(q::decode_sparse([&] {
    std::vector<std::byte> w;
    q::make_codec("int8")->encode(x, w);
    return w;
  }(), idx, values));
  const std::uint32_t bad[] = {static_cast<std::uint32_t>(x.size())};
  const float one[] = {1.0f};
  EXPECT_THROW(b.update_sparse("k", shard, x, bad, one), InvalidArgument);
}

}  // namespace
