// Dense codecs (none, fp16, bf16, int8, int4): error bounds, round trips, stochastic
// rounding, agreement of the kernel variants, and rejection of corrupt buffers.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "quant/codec.hpp"
#include "quant/convert.hpp"
#include "kernels/isa.hpp"
#include "kernels/quant.hpp"
#include "strata/errors.hpp"

namespace {

using strata::InvalidArgument;
namespace q = strata::quant;

constexpr std::size_t kSizes[] = {0, 1, 7, 255, 256, 257, 100003};

// Magnitudes log-uniform in [1e-3, 1e3] with random signs: normal numbers in every format.
std::vector<float> log_uniform(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> e(-3.0f, 3.0f);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> x(n);
  for (float& v : x) v = std::pow(10.0f, e(rng)) * (neg(rng) ? -1.0f : 1.0f);
  return x;
}

std::vector<float> normal(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

std::vector<float> round_trip(const q::Codec& c, const std::vector<float>& x,
                              std::uint64_t seed = 0) {
  std::vector<std::byte> wire;
  c.encode(x, wire, seed);
  std::vector<float> out(x.size(), -1.0f);
  c.decode(wire, out);
  return out;
}

// The scale the encoder stores for block b: max|x| / qmax, in float.
float block_scale(const std::vector<float>& x, std::size_t b, std::size_t block, float qmax) {
  float m = 0;
  for (std::size_t i = b * block; i < std::min(x.size(), (b + 1) * block); ++i) {
    m = std::max(m, std::fabs(x[i]));
  }
  return m / qmax;
}

TEST(QuantCodec, NoneIsLosslessAndSized) {
  const auto c = q::make_codec("none");
  EXPECT_FALSE(c->lossy());
  for (std::size_t n : kSizes) {
    const auto x = normal(n, 1);
    std::vector<std::byte> wire;
    c->encode(x, wire);
    EXPECT_EQ(wire.size(), c->expected_wire_bytes(n));
    EXPECT_EQ(wire.size(), q::kWireHeaderBytes + 4 * n);
    EXPECT_EQ(round_trip(*c, x), x) << n;
  }
}

TEST(QuantCodec, Fp16RelativeErrorWithinHalfUlp) {
  const auto c = q::make_codec("fp16");
  EXPECT_TRUE(c->lossy());
  for (std::size_t n : kSizes) {
    const auto x = log_uniform(n, 2);
    const auto y = round_trip(*c, x);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_LE(std::fabs(y[i] - x[i]), std::ldexp(std::fabs(x[i]), -11)) << "n=" << n << " i=" << i;
    }
    EXPECT_EQ(c->expected_wire_bytes(n), q::kWireHeaderBytes + 2 * n);
  }
}

TEST(QuantCodec, Bf16RelativeErrorWithinHalfUlp) {
  const auto c = q::make_codec("bf16");
  for (std::size_t n : kSizes) {
    const auto x = log_uniform(n, 3);
    const auto y = round_trip(*c, x);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_LE(std::fabs(y[i] - x[i]), std::ldexp(std::fabs(x[i]), -8)) << "n=" << n << " i=" << i;
    }
  }
}

// Deterministic rounding: |x - decoded| <= scale / 2 per block, up to the float rounding of
// x * (qmax / max) and of code * scale (a few ulps of scale, covered by the 1e-5 relative).
void check_block_bound(const char* spec, float qmax, std::uint32_t block) {
  q::CodecSpec s = q::parse_codec(spec);
  s.block = block;
  const auto c = q::make_codec(s);
  for (std::size_t n : kSizes) {
    const auto x = normal(n, 4);
    const auto y = round_trip(*c, x);
    std::vector<std::byte> wire;
    c->encode(x, wire);
    EXPECT_EQ(wire.size(), c->expected_wire_bytes(n));
    for (std::size_t i = 0; i < n; ++i) {
      const float scale = block_scale(x, i / block, block, qmax);
      ASSERT_LE(std::fabs(y[i] - x[i]), scale * (0.5f + 1e-5f))
          << spec << " block=" << block << " n=" << n << " i=" << i;
    }
  }
}

TEST(QuantCodec, Int8ErrorAtMostHalfScale) {
  check_block_bound("int8", 127, 256);
  check_block_bound("int8", 127, 1);
  check_block_bound("int8", 127, 77);
  check_block_bound("int8", 127, 4096);  // blocks larger than the kernels' staging buffer
}

TEST(QuantCodec, Int4ErrorAtMostHalfScale) {
  check_block_bound("int4", 7, 256);
  check_block_bound("int4", 7, 2);
  check_block_bound("int4", 7, 3000);
}

TEST(QuantCodec, BlockWireSizes) {
  EXPECT_EQ(q::make_codec("int8")->expected_wire_bytes(1000), 24u + 4 * 4 + 1000);
  EXPECT_EQ(q::make_codec("int4")->expected_wire_bytes(1001), 24u + 4 * 4 + 501);
  EXPECT_EQ(q::make_codec("int8")->expected_wire_bytes(0), 24u);
  EXPECT_EQ(q::make_codec("bf16")->max_wire_bytes(10), 44u);
}

// The largest element of a block is exact (code +-qmax), zeros stay zero.
TEST(QuantCodec, BlockExtremesAndZeros) {
  std::vector<float> x(512, 0.0f);
  x[3] = -2.5f;
  x[4] = 1.0f;
  for (const char* spec : {"int8", "int4", "int8,stochastic"}) {
    const auto y = round_trip(*q::make_codec(spec), x, 9);
    EXPECT_EQ(y[3], -2.5f) << spec;
    for (std::size_t i = 256; i < 512; ++i) ASSERT_EQ(y[i], 0.0f) << spec;
    EXPECT_EQ(y[0], 0.0f) << spec;
  }
}

TEST(QuantCodec, TinyBlocksKeepTheirRelativeAccuracy) {
  std::vector<float> x = normal(256, 5);
  for (float& v : x) v *= 1e-38f;  // scales are subnormal; qmax / max would overflow
  x[0] = std::numeric_limits<float>::denorm_min();
  const auto y = round_trip(*q::make_codec("int8"), x);
  const float scale = block_scale(x, 0, 256, 127);
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_LE(std::fabs(y[i] - x[i]), scale * 0.51f) << i;
  }
}

TEST(QuantCodec, NonFiniteInputPoisonsOnlyItsBlock) {
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    for (const char* spec : {"int8", "int4"}) {
      auto x = normal(768, 6);
      x[300] = bad;
      const auto y = round_trip(*q::make_codec(spec), x);
      for (std::size_t i = 256; i < 512; ++i) ASSERT_TRUE(std::isnan(y[i])) << spec << " " << i;
      for (std::size_t i = 0; i < 256; ++i) ASSERT_TRUE(std::isfinite(y[i])) << spec << " " << i;
      for (std::size_t i = 512; i < 768; ++i) ASSERT_TRUE(std::isfinite(y[i])) << spec << " " << i;
    }
  }
}

// Over many seeds, the mean of stochastically rounded values converges to the input. One
// draw has standard deviation at most scale / 2, so the mean of S draws is within
// 6 * scale / (2 sqrt(S)) of x with overwhelming probability for every element.
TEST(QuantCodec, StochasticRoundingIsUnbiased) {
  constexpr int kSeeds = 2000;
  for (const auto& [spec, qmax] : {std::pair{"int8,stochastic", 127.0f}, {"int4,stochastic", 7.0f}}) {
    const auto c = q::make_codec(spec);
    std::vector<float> x(256);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& v : x) v = u(rng);
    x[0] = 1.0f;
    const float scale = block_scale(x, 0, 256, qmax);
    std::vector<double> sum(x.size(), 0.0);
    for (int s = 0; s < kSeeds; ++s) {
      const auto y = round_trip(*c, x, 1000 + static_cast<std::uint64_t>(s));
      for (std::size_t i = 0; i < x.size(); ++i) {
        ASSERT_LT(std::fabs(y[i] - x[i]), scale * 1.0001f) << spec;  // one step at most
        sum[i] += y[i];
      }
    }
    const double tol = 6 * scale / (2 * std::sqrt(static_cast<double>(kSeeds)));
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::fabs(sum[i] / kSeeds - x[i]));
    }
    EXPECT_LE(worst, tol) << spec;
    // Deterministic rounding, by contrast, is biased for most elements (sanity of the test).
    const auto det = round_trip(*q::make_codec(qmax > 100 ? "int8" : "int4"), x);
    double det_worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) det_worst = std::max(det_worst, std::fabs(double(det[i]) - x[i]));
    EXPECT_GT(det_worst, tol) << spec;
  }
}

TEST(QuantCodec, StochasticRoundingIsReproducibleFromTheSeed) {
  const auto c = q::make_codec("int8,stochastic");
  const auto x = normal(1000, 8);
  std::vector<std::byte> a, b, d;
  c->encode(x, a, 42);
  c->encode(x, b, 42);
  c->encode(x, d, 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, d);
}

TEST(QuantCodec, DecodeAddAccumulates) {
  for (const char* spec : {"none", "fp16", "bf16", "int8", "int4"}) {
    const auto c = q::make_codec(spec);
    const auto x = normal(1001, 10);
    std::vector<std::byte> wire;
    c->encode(x, wire);
    std::vector<float> dec(x.size());
    c->decode(wire, dec);
    std::vector<float> acc(x.size(), 0.25f);
    c->decode_add(wire, acc);
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(acc[i], 0.25f + dec[i]) << spec << " " << i;
    // The free functions need no codec object.
    std::vector<float> again(x.size());
    q::decode(wire, again);
    EXPECT_EQ(again, dec) << spec;
  }
}

TEST(QuantCodec, MisalignedBuffersWork) {
  const auto c = q::make_codec("fp16");
  const auto x = normal(301, 11);
  std::vector<std::byte> raw(c->max_wire_bytes(x.size()) + 1);
  const std::size_t len = c->encode(x, std::span<std::byte>(raw).subspan(1));
  std::vector<std::byte> aligned;
  c->encode(x, aligned);
  ASSERT_EQ(len, aligned.size());
  EXPECT_TRUE(std::equal(aligned.begin(), aligned.end(), raw.begin() + 1));
  std::vector<float> y(x.size());
  c->decode(std::span<const std::byte>(raw).subspan(1, len), y);
  EXPECT_EQ(y, round_trip(*c, x));
}

TEST(QuantCodec, EncodeRejectsSmallOutput) {
  const auto c = q::make_codec("int8");
  const auto x = normal(100, 12);
  std::vector<std::byte> out(c->max_wire_bytes(100) - 1);
  EXPECT_THROW(c->encode(x, std::span<std::byte>(out)), InvalidArgument);
}

// Every kernel variant must produce the same bytes and the same decoded bits, including
// for NaN, infinities, subnormals and signed zeros.
TEST(QuantCodec, KernelVariantsAgreeBitwise) {
  if (!strata::kernels::isa_supported(strata::kernels::Isa::avx2)) GTEST_SKIP() << "no AVX2";
  auto x = normal(100003, 13);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[600] = -std::numeric_limits<float>::infinity();
  x[1000] = std::numeric_limits<float>::denorm_min();
  x[1001] = -0.0f;
  x[70000] = 70000.0f;  // fp16 overflow
  x[70001] = 1e-6f;     // fp16 subnormal
  for (const char* spec : {"fp16", "bf16", "int8", "int4", "int8,stochastic", "int4,stochastic",
                           "topk:0.01", "topk:0.01+int8", "topk:0.2+fp16,exact"}) {
    const auto c = q::make_codec(spec);
    std::vector<std::byte> w[2];
    std::vector<float> d[2], a[2];
    for (int v = 0; v < 2; ++v) {
      const auto prev = strata::kernels::set_isa(v == 0 ? strata::kernels::Isa::generic : strata::kernels::Isa::avx2);
      c->encode(x, w[v], 5);
      d[v].assign(x.size(), 0.0f);
      c->decode(w[0], d[v]);
      a[v] = x;
      c->decode_add(w[0], a[v]);
      strata::kernels::set_isa(prev);
    }
    EXPECT_EQ(w[0], w[1]) << spec;
    EXPECT_EQ(0, std::memcmp(d[0].data(), d[1].data(), 4 * x.size())) << spec;
    EXPECT_EQ(0, std::memcmp(a[0].data(), a[1].data(), 4 * x.size())) << spec;
  }
}

TEST(QuantCodec, HalfInputsConvert) {
  const auto x = log_uniform(99, 14);
  std::vector<std::uint16_t> h(x.size());
  q::narrow_from_f32(strata::DataType::f16, x, h.data());
  std::vector<float> back(x.size());
  q::widen_to_f32(strata::DataType::f16, h.data(), h.size(), back);
  EXPECT_EQ(back, round_trip(*q::make_codec("fp16"), x));
  EXPECT_THROW(q::widen_to_f32(strata::DataType::i32, h.data(), h.size(), back), InvalidArgument);
}

// ---- corrupt and truncated buffers ----

std::vector<std::byte> encoded(const char* spec, std::size_t n) {
  std::vector<std::byte> w;
  q::make_codec(spec)->encode(normal(n, 15), w, 3);
  return w;
}

// Decoding must throw InvalidArgument and leave the output as it was.
void expect_rejected(const std::vector<std::byte>& w, std::size_t n, const std::string& what) {
  std::vector<float> out(n, 7.0f);
  EXPECT_THROW(q::decode(w, out), InvalidArgument) << what;
  EXPECT_THROW(q::decode_add(w, out), InvalidArgument) << what;
  for (float v : out) ASSERT_EQ(v, 7.0f) << what;
}

const char* const kAllSpecs[] = {"none", "fp16", "bf16", "int8", "int4", "topk:0.05",
                                 "topk:0.5+int8", "topk:0.01+fp16", "topk:0.02+int4,exact"};

TEST(QuantCodec, TruncatedBuffersThrow) {
  for (const char* spec : kAllSpecs) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{333}}) {
      const auto w = encoded(spec, n);
      for (std::size_t len = 0; len < w.size(); ++len) {
        expect_rejected(std::vector<std::byte>(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(len)), n,
                        std::string(spec) + " n=" + std::to_string(n) + " len=" + std::to_string(len));
      }
      auto longer = w;
      longer.push_back(std::byte{0});
      expect_rejected(longer, n, std::string(spec) + " with a stray byte");
    }
  }
}

TEST(QuantCodec, CorruptHeadersThrow) {
  const auto base = encoded("int8", 300);
  const auto patched = [&](std::size_t at, std::uint8_t v) {
    auto w = base;
    w[at] = std::byte{v};
    return w;
  };
  expect_rejected(patched(0, 0x50), 300, "magic");
  expect_rejected(patched(1, 2), 300, "version");
  expect_rejected(patched(2, 7), 300, "sparsity");
  expect_rejected(patched(3, 9), 300, "value coding");
  expect_rejected(patched(3, 0), 300, "f32 with a block size");
  expect_rejected(patched(5, 0x10), 300, "a block size that changes the length");
  auto zero_block = base;
  std::memset(zero_block.data() + 4, 0, 4);
  expect_rejected(zero_block, 300, "block 0");
  auto big_n = base;
  big_n[15] = std::byte{0x80};
  expect_rejected(big_n, 300, "huge n");

  // Right buffer, wrong output size.
  std::vector<float> out(299);
  EXPECT_THROW(q::decode(base, out), InvalidArgument);
  // A codec object refuses another codec's buffer.
  std::vector<float> out300(300);
  EXPECT_THROW(q::make_codec("int4")->decode(base, out300), InvalidArgument);
  q::CodecSpec other_block = q::parse_codec("int8");
  other_block.block = 128;
  EXPECT_THROW(q::make_codec(other_block)->decode(base, out300), InvalidArgument);
  EXPECT_NO_THROW(q::make_codec("int8")->decode(base, out300));
}

// Random corruption may decode to other numbers but must never read out of bounds or
// throw anything but InvalidArgument.
TEST(QuantCodec, RandomCorruptionIsContained) {
  std::mt19937 rng(16);
  for (const char* spec : kAllSpecs) {
    const auto base = encoded(spec, 2000);
    std::uniform_int_distribution<std::size_t> pos(0, base.size() - 1);
    std::vector<float> out(2000);
    for (int trial = 0; trial < 300; ++trial) {
      auto w = base;
      for (int f = 0; f < 3; ++f) w[pos(rng)] ^= std::byte{static_cast<unsigned char>(1u << (rng() % 8))};
      try {
        q::decode(w, out);
      } catch (const InvalidArgument&) {
      }
    }
  }
}

}  // namespace
