// Top-k selection (exact and sampled), index coding, and the top-k codecs.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "quant/codec.hpp"
#include "quant/index_coding.hpp"
#include "quant/topk_select.hpp"
#include "strata/errors.hpp"

namespace {

namespace q = strata::quant;
using Indices = std::vector<std::uint32_t>;

std::uint32_t key(float f) { return std::bit_cast<std::uint32_t>(f) & 0x7fffffffu; }

enum class Dist { normal, heavy, uniform, ties, sparse };
const char* name(Dist d) {
  switch (d) {
    case Dist::normal: return "normal";
    case Dist::heavy: return "heavy";
    case Dist::uniform: return "uniform";
    case Dist::ties: return "ties";
    case Dist::sparse: return "sparse";
  }
  return "?";
}

std::vector<float> make(Dist d, std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::student_t_distribution<float> t(1.5f);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (d) {
      case Dist::normal: x[i] = g(rng); break;
      case Dist::heavy: x[i] = t(rng); break;
      case Dist::uniform: x[i] = u(rng); break;
      case Dist::ties: x[i] = std::round(g(rng) * 20.0f) / 20.0f; break;  // ~100 distinct values
      case Dist::sparse: x[i] = (rng() % 50 == 0) ? g(rng) : 0.0f; break;
    }
  }
  return x;
}

// The reference: order by |x| descending then index ascending, skip zeros, take k.
Indices reference_topk(const std::vector<float>& x, std::size_t k) {
  Indices idx(x.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return key(x[a]) > key(x[b]); });
  Indices out;
  for (std::size_t j = 0; j < idx.size() && out.size() < k; ++j) {
    if (key(x[idx[j]]) != 0) out.push_back(idx[j]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every kept |x| >= every dropped |x| (and kept ones are ascending and unique).
void expect_separated(const std::vector<float>& x, const Indices& kept, const std::string& what) {
  ASSERT_TRUE(std::is_sorted(kept.begin(), kept.end())) << what;
  ASSERT_TRUE(std::adjacent_find(kept.begin(), kept.end()) == kept.end()) << what;
  std::vector<bool> in(x.size(), false);
  std::uint32_t min_kept = 0xffffffffu;
  for (std::uint32_t i : kept) {
    in[i] = true;
    min_kept = std::min(min_kept, key(x[i]));
  }
  std::uint32_t max_dropped = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!in[i]) max_dropped = std::max(max_dropped, key(x[i]));
  }
  if (!kept.empty()) {
    EXPECT_GE(min_kept, max_dropped) << what;
  }
}

TEST(QuantTopk, ExactMatchesReference) {
  for (Dist d : {Dist::normal, Dist::ties, Dist::sparse, Dist::heavy}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{257}, std::size_t{100003}}) {
      for (double density : {1e-4, 0.01, 0.05, 0.3, 1.0}) {
        const auto x = make(d, n, 1);
        const std::size_t k = q::topk_count(density, n);
        Indices got;
        q::select_topk_exact(x, k, got);
        EXPECT_EQ(got, reference_topk(x, k)) << name(d) << " n=" << n << " density=" << density;
      }
    }
  }
}

TEST(QuantTopk, NeverKeepsZeros) {
  std::vector<float> x(1000, 0.0f);
  x[10] = 1.0f;
  x[500] = -0.0f;
  x[999] = -2.0f;
  Indices got;
  q::select_topk_exact(x, 50, got);
  EXPECT_EQ(got, (Indices{10, 999}));
  q::select_topk_sampled(x, 50, got);
  EXPECT_EQ(got, (Indices{10, 999}));
  std::vector<float> zeros(1u << 17, 0.0f);
  q::select_topk_sampled(zeros, 1000, got);
  EXPECT_TRUE(got.empty());
}

TEST(QuantTopk, NaNsRankFirst) {
  auto x = make(Dist::normal, 5000, 2);
  x[1234] = std::numeric_limits<float>::quiet_NaN();
  Indices got;
  q::select_topk_exact(x, 1, got);
  EXPECT_EQ(got, Indices{1234});
}

// Sampled selection keeps between (1 - tol) k and k elements, all of them ahead of every
// dropped one, and exactly the exact selector's set when it keeps k.
TEST(QuantTopk, SampledWithinToleranceAndSeparated) {
  for (Dist d : {Dist::normal, Dist::heavy, Dist::uniform, Dist::ties}) {
    for (std::size_t n : {std::size_t{100003}, std::size_t{1} << 20}) {
      for (double density : {0.001, 0.01, 0.1, 0.3}) {
        const auto x = make(d, n, 3);
        const std::size_t k = q::topk_count(density, n);
        Indices got;
        q::TopkStats st;
        q::select_topk_sampled(x, k, got, &st);
        const std::string what = std::string(name(d)) + " n=" + std::to_string(n) +
                                 " density=" + std::to_string(density) +
                                 " passes=" + std::to_string(st.passes);
        EXPECT_LE(got.size(), k) << what;
        EXPECT_GE(static_cast<double>(got.size()), (1 - q::kSampledTolerance) * static_cast<double>(k)) << what;
        EXPECT_LE(st.passes, 4) << what;
        expect_separated(x, got, what);
        if (got.size() == k) {
          Indices exact;
          q::select_topk_exact(x, k, exact);
          EXPECT_EQ(got, exact) << what;
        }
      }
    }
  }
}

TEST(QuantTopk, SampledWithFewNonzerosKeepsThemAll) {
  const auto x = make(Dist::sparse, 200000, 4);  // ~2% nonzero
  const std::size_t nonzero = static_cast<std::size_t>(std::count_if(x.begin(), x.end(), [](float v) { return v != 0; }));
  Indices got;
  q::select_topk_sampled(x, q::topk_count(0.1, x.size()), got);
  EXPECT_EQ(got.size(), nonzero);
  expect_separated(x, got, "sparse");
}

TEST(QuantTopk, SampledIsDeterministic) {
  const auto x = make(Dist::normal, 300000, 5);
  Indices a, b;
  q::select_topk_sampled(x, 3000, a);
  q::select_topk_sampled(x, 3000, b);
  EXPECT_EQ(a, b);
}

// ---- index coding ----

Indices spread(std::size_t n, std::size_t k, unsigned seed) {
  Indices all(n);
  std::iota(all.begin(), all.end(), 0u);
  std::mt19937 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(k);
  std::sort(all.begin(), all.end());
  return all;
}

TEST(QuantIndexCoding, PicksVarintWhenSparseAndBitmapWhenDense) {
  const std::size_t n = 100003;
  const auto sparse = spread(n, 1000, 1);
  const auto dense = spread(n, 50000, 2);
  EXPECT_EQ(q::plan_indices(sparse, n).coding, q::IndexCoding::delta_varint);
  EXPECT_EQ(q::plan_indices(dense, n).coding, q::IndexCoding::bitmap);
  EXPECT_EQ(q::plan_indices(dense, n).bytes, 1 + (n + 7) / 8);
  EXPECT_LT(q::plan_indices(sparse, n).bytes, 1 + 2 * sparse.size());
}

TEST(QuantIndexCoding, RoundTripsBothCodings) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{9}, std::size_t{100003}}) {
    for (std::size_t k : {std::size_t{0}, std::size_t{1}, n / 50, n / 3, n}) {
      if (k > n) continue;
      const auto idx = spread(n, k, 3);
      const auto plan = q::plan_indices(idx, n);
      std::vector<std::byte> buf(plan.bytes);
      q::write_indices(plan, idx, n, buf.data());
      Indices back;
      q::read_indices(buf, n, k, back);
      EXPECT_EQ(back, idx) << "n=" << n << " k=" << k;
      EXPECT_LE(plan.bytes, q::max_index_bytes(n, k));
    }
  }
  // Large gaps need multi-byte varints.
  const Indices far = {0, 200, 70000, 3000000, 4000000000u};
  const auto plan = q::plan_indices(far, 4294967295u);
  ASSERT_EQ(plan.coding, q::IndexCoding::delta_varint);
  std::vector<std::byte> buf(plan.bytes);
  q::write_indices(plan, far, 4294967295u, buf.data());
  Indices back;
  q::read_indices(buf, 4294967295u, far.size(), back);
  EXPECT_EQ(back, far);
}

TEST(QuantIndexCoding, RejectsMalformedSections) {
  using B = std::vector<std::byte>;
  const auto b = [](std::initializer_list<int> v) {
    B out;
    for (int x : v) out.push_back(static_cast<std::byte>(x));
    return out;
  };
  Indices out;
  const auto bad = [&](const B& s, std::uint64_t n, std::uint64_t k) {
    EXPECT_THROW(q::read_indices(s, n, k, out), strata::InvalidArgument);
  };
  bad(b({}), 10, 0);                       // no flag byte
  bad(b({2}), 10, 0);                      // unknown coding
  bad(b({0, 3, 3}), 10, 3);                // too few indices
  bad(b({0, 3, 3, 1}), 10, 2);             // stray byte
  bad(b({0, 9, 0}), 10, 2);                // index 10 past n
  bad(b({0, 0x80}), 1000, 1);              // ends inside a varint
  bad(b({0, 0x81, 0x00}), 1000, 1);        // non-canonical
  bad(b({0, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), 1u << 31, 1);  // 6-byte varint
  bad(b({1, 0x01}), 10, 1);                // bitmap too short
  bad(b({1, 0x01, 0x04}), 10, 1);          // bit 10 set, past n
  bad(b({1, 0x03, 0x00}), 10, 1);          // two set, header says one
}

// ---- the top-k codecs ----

TEST(QuantTopkCodec, RoundTripsKeepValuesAtSelectedIndices) {
  for (const char* spec : {"topk:0.01", "topk:0.01,exact", "topk:0.3,exact", "topk:1"}) {
    const auto c = q::make_codec(spec);
    EXPECT_TRUE(c->lossy());
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{255},
                          std::size_t{256}, std::size_t{257}, std::size_t{100003}}) {
      const auto x = make(Dist::normal, n, 6);
      std::vector<std::byte> wire;
      c->encode(x, wire);
      EXPECT_LE(wire.size(), c->max_wire_bytes(n)) << spec << " n=" << n;
      const auto h = q::read_header(wire);
      EXPECT_EQ(h.n, n);
      EXPECT_EQ(h.k, std::min<std::size_t>(q::topk_count(c->spec().density, n), n)) << spec << " n=" << n;
      std::vector<float> y(n, 5.0f);
      c->decode(wire, y);
      const auto kept = reference_topk(x, h.k);
      std::vector<bool> in(n, false);
      for (std::uint32_t i : kept) in[i] = true;
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[i], in[i] ? x[i] : 0.0f) << spec << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(QuantTopkCodec, QuantizedValuesStayWithinTheirBounds) {
  const std::size_t n = 100003;
  const auto x = make(Dist::normal, n, 7);
  for (const auto& [spec, rel] : {std::pair{"topk:0.05+fp16", 0x1p-11f}, {"topk:0.05+bf16", 0x1p-8f}}) {
    std::vector<float> y(n);
    const auto c = q::make_codec(spec);
    std::vector<std::byte> wire;
    c->encode(x, wire);
    c->decode(wire, y);
    for (std::size_t i = 0; i < n; ++i) {
      if (y[i] != 0) {
        ASSERT_LE(std::fabs(y[i] - x[i]), std::fabs(x[i]) * rel) << spec;
      }
    }
  }
  for (const auto& [spec, qmax] : {std::pair{"topk:0.05+int8", 127.0f}, {"topk:0.05+int4", 7.0f},
                                  {"topk:0.05+int8,stochastic", 63.5f}}) {
    std::vector<float> y(n);
    const auto c = q::make_codec(spec);
    std::vector<std::byte> wire;
    c->encode(x, wire, 11);
    c->decode(wire, y);
    const auto kept = reference_topk(x, q::read_header(wire).k);
    float amax = 0;
    for (std::uint32_t i : kept) amax = std::max(amax, std::fabs(x[i]));
    // Blocks run over the kept values; any block's scale is at most amax / qmax.
    for (std::uint32_t i : kept) {
      ASSERT_LE(std::fabs(y[i] - x[i]), amax / qmax * 0.5f * 1.0001f) << spec << " i=" << i;
    }
  }
}

TEST(QuantTopkCodec, WireUsesTheSmallerIndexCoding) {
  const std::size_t n = 100003;
  const auto x = make(Dist::normal, n, 8);
  const auto coding_of = [&](const char* spec) {
    const auto c = q::make_codec(spec);
    std::vector<std::byte> wire;
    c->encode(x, wire);
    const auto h = q::read_header(wire);
    // The index section follows the header and k f32 values.
    const std::size_t vbytes = 4 * h.k;
    return static_cast<q::IndexCoding>(wire[q::kWireHeaderBytes + vbytes]);
  };
  EXPECT_EQ(coding_of("topk:0.01,exact"), q::IndexCoding::delta_varint);
  EXPECT_EQ(coding_of("topk:0.5,exact"), q::IndexCoding::bitmap);
}

TEST(QuantTopkCodec, ExpectedBytesTrackActualSize) {
  const std::size_t n = 1u << 20;
  const auto x = make(Dist::normal, n, 9);
  for (const char* spec : {"topk:0.01+int8", "topk:0.001", "topk:0.3+fp16,exact"}) {
    const auto c = q::make_codec(spec);
    std::vector<std::byte> wire;
    c->encode(x, wire);
    const double expected = static_cast<double>(c->expected_wire_bytes(n));
    EXPECT_NEAR(static_cast<double>(wire.size()), expected, 0.1 * expected) << spec;
  }
}

TEST(QuantTopkCodec, DecodeAddScattersIntoTheAccumulator) {
  const auto c = q::make_codec("topk:0.02+int8");
  const auto x = make(Dist::normal, 50000, 10);
  std::vector<std::byte> wire;
  c->encode(x, wire);
  std::vector<float> dec(x.size());
  c->decode(wire, dec);
  std::vector<float> acc(x.size(), 1.0f);
  c->decode_add(wire, acc);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(acc[i], 1.0f + dec[i]) << i;
}

}  // namespace
