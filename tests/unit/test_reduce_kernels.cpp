// Reduction kernels and half-precision conversions against an independent scalar model.
//
// The model never uses the code under test: it decodes f16/bf16 with ldexp, computes in
// double and rounds by searching for the nearest representable value. Computing in double
// and rounding once to f32/f16/bf16 equals "compute in f32, round to the narrow type"
// because double has at least 2p+2 bits for each of them (Figueroa), so the model is exact.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/reduce.hpp"
#include "base/half.hpp"
#include "strata/errors.hpp"
#include "strata/types.hpp"

namespace strata::kernels {
// Readable parameter names in gtest's failure messages.
void PrintTo(Isa isa, std::ostream* os) { *os << to_string(isa); }
}  // namespace strata::kernels

namespace {

using strata::DataType;
using strata::ReduceOp;
using strata::kernels::Isa;
namespace core = strata::core;
namespace coll = strata::kernels;

constexpr DataType kAllTypes[] = {DataType::f32, DataType::f64, DataType::f16, DataType::bf16,
                                  DataType::i8,  DataType::u8,  DataType::i32, DataType::i64};
constexpr ReduceOp kAllOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                ReduceOp::avg};
constexpr std::size_t kSizes[] = {0, 1, 7, 1000, 4099};

bool valid_combo(DataType dt, ReduceOp op) {
  return op != ReduceOp::avg || strata::is_floating(dt);
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> v{Isa::generic};
  if (coll::isa_supported(Isa::avx2)) v.push_back(Isa::avx2);
  return v;
}

// ---- independent model of the narrow float formats ----

struct NarrowFormat {
  int mant_bits;  // stored mantissa bits
  int exp_bits;
  std::uint16_t max_finite;
  std::uint16_t inf;
  std::uint16_t quiet_nan;  // what the kernels produce for any NaN
};
constexpr NarrowFormat kHalf{10, 5, 0x7bff, 0x7c00, 0x7e00};
constexpr NarrowFormat kBf16{7, 8, 0x7f7f, 0x7f80, 0x7fc0};

double decode(const NarrowFormat& f, std::uint16_t h) {
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const int e = (h >> f.mant_bits) & ((1 << f.exp_bits) - 1);
  const int m = h & ((1 << f.mant_bits) - 1);
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << f.exp_bits) - 1) {
    return m != 0 ? std::numeric_limits<double>::quiet_NaN()
                  : sign * std::numeric_limits<double>::infinity();
  }
  if (e == 0) return sign * std::ldexp(m, 1 - bias - f.mant_bits);
  return sign * std::ldexp(m + (1 << f.mant_bits), e - bias - f.mant_bits);
}

// Round to nearest, ties to even, by bisection over the (monotonic) positive encodings.
std::uint16_t round_to(const NarrowFormat& f, double d) {
  if (std::isnan(d)) return f.quiet_nan;
  const std::uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  const double a = std::fabs(d);
  std::uint16_t lo = 0, hi = f.max_finite;
  while (lo < hi) {  // largest encoding with value <= a
    const auto mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
    if (decode(f, mid) <= a) {
      lo = mid;
    } else {
      hi = static_cast<std::uint16_t>(mid - 1);
    }
  }
  const double vlo = decode(f, lo);
  if (vlo == a) return lo | sign;
  // Past max_finite the next "value" is the first power of two the format cannot hold.
  const auto up = static_cast<std::uint16_t>(lo + 1);
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const double vup = up == f.inf ? std::ldexp(1.0, bias + 1) : decode(f, up);
  if (a >= vup) return up | sign;
  const double dlo = a - vlo, dup = vup - a;
  const std::uint16_t r = dlo < dup ? lo : dup < dlo ? up : ((lo & 1) ? up : lo);
  return r | sign;
}

// ---- reference reductions on raw element bits ----

double ref_min(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b && a == 0) return (std::signbit(a) || std::signbit(b)) ? -0.0 : 0.0;
  return a < b ? a : b;
}
double ref_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b && a == 0) return (std::signbit(a) && std::signbit(b)) ? -0.0 : 0.0;
  return a > b ? a : b;
}
double ref_float_op(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return a + b;
    case ReduceOp::prod: return a * b;
    case ReduceOp::min: return ref_min(a, b);
    case ReduceOp::max: return ref_max(a, b);
  }
  return 0;
}

template <class T>
std::uint64_t ref_int(ReduceOp op, std::uint64_t abits, std::uint64_t bbits) {
  const T a = static_cast<T>(abits), b = static_cast<T>(bbits);
  __int128 r = 0;
  switch (op) {
    case ReduceOp::sum: r = static_cast<__int128>(a) + b; break;
    case ReduceOp::prod: r = static_cast<__int128>(a) * b; break;
    case ReduceOp::min: r = a < b ? a : b; break;
    case ReduceOp::max: r = a > b ? a : b; break;
    case ReduceOp::avg: ADD_FAILURE() << "avg on an integer type"; break;
  }
  // Conversion to an unsigned type is modular: exactly the wrap-around we expect.
  return static_cast<std::uint64_t>(
      static_cast<std::make_unsigned_t<T>>(static_cast<unsigned __int128>(r)));
}

std::uint64_t f32_bits(double d) {
  const float f = static_cast<float>(d);
  return std::isnan(f) ? 0x7fc00000u : std::bit_cast<std::uint32_t>(f);
}
std::uint64_t f64_bits(double d) {
  return std::isnan(d) ? 0x7ff8000000000000u : std::bit_cast<std::uint64_t>(d);
}

std::uint64_t ref_elem(DataType dt, ReduceOp op, std::uint64_t a, std::uint64_t b) {
  switch (dt) {
    case DataType::f32: {
      const double x = std::bit_cast<float>(static_cast<std::uint32_t>(a));
      const double y = std::bit_cast<float>(static_cast<std::uint32_t>(b));
      return f32_bits(ref_float_op(op, x, y));
    }
    case DataType::f64:
      return f64_bits(ref_float_op(op, std::bit_cast<double>(a), std::bit_cast<double>(b)));
    case DataType::f16:
      return round_to(kHalf, ref_float_op(op, decode(kHalf, static_cast<std::uint16_t>(a)),
                                          decode(kHalf, static_cast<std::uint16_t>(b))));
    case DataType::bf16:
      return round_to(kBf16, ref_float_op(op, decode(kBf16, static_cast<std::uint16_t>(a)),
                                          decode(kBf16, static_cast<std::uint16_t>(b))));
    case DataType::i8: return ref_int<std::int8_t>(op, a, b);
    case DataType::u8: return ref_int<std::uint8_t>(op, a, b);
    case DataType::i32: return ref_int<std::int32_t>(op, a, b);
    case DataType::i64: return ref_int<std::int64_t>(op, a, b);
  }
  return 0;
}

std::uint64_t ref_avg(DataType dt, std::uint64_t x, int n) {
  switch (dt) {
    case DataType::f32:
      return f32_bits(static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(x))) / n);
    case DataType::f64: return f64_bits(std::bit_cast<double>(x) / n);
    case DataType::f16: return round_to(kHalf, decode(kHalf, static_cast<std::uint16_t>(x)) / n);
    case DataType::bf16: return round_to(kBf16, decode(kBf16, static_cast<std::uint16_t>(x)) / n);
    default: ADD_FAILURE() << "avg on an integer type"; return 0;
  }
}

// ---- buffers of raw elements ----

// Element-addressed byte buffer, 8-byte aligned so every element type is naturally aligned.
class Buffer {
 public:
  Buffer(DataType dt, std::size_t n)
      : elem_(strata::dtype_size(dt)), words_((n * elem_ + 7) / 8 + 1) {}
  void* data() { return words_.data(); }
  std::uint64_t get(std::size_t i) const {
    std::uint64_t v = 0;
    std::memcpy(&v, reinterpret_cast<const char*>(words_.data()) + i * elem_, elem_);
    return v;
  }
  void set(std::size_t i, std::uint64_t v) {
    std::memcpy(reinterpret_cast<char*>(words_.data()) + i * elem_, &v, elem_);
  }

 private:
  std::size_t elem_;
  std::vector<std::uint64_t> words_;
};

std::uint64_t mask_for(DataType dt) {
  const std::size_t bytes = strata::dtype_size(dt);
  return bytes == 8 ? ~0ull : (1ull << (8 * bytes)) - 1;
}

// Ordinary values, the awkward ones (signed zeros, infinities, NaNs with payloads,
// subnormals, extremes), arbitrary bit patterns, and equal or zero-of-opposite-sign pairs
// so that min/max tie-breaking is exercised.
void fill_pair(DataType dt, Buffer& a, Buffer& b, std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> moderate(-100.0, 100.0);
  std::uniform_int_distribution<int> pick(0, 99);
  auto encode = [&](double d) -> std::uint64_t {
    switch (dt) {
      case DataType::f32: return std::bit_cast<std::uint32_t>(static_cast<float>(d));
      case DataType::f64: return std::bit_cast<std::uint64_t>(d);
      case DataType::f16: return round_to(kHalf, d);
      case DataType::bf16: return round_to(kBf16, d);
      default: return static_cast<std::uint64_t>(static_cast<std::int64_t>(d));
    }
  };
  auto special = [&]() -> std::uint64_t {
    static const std::uint64_t f32s[] = {0x0,        0x80000000, 0x7f800000, 0xff800000,
                                         0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa12345,
                                         0x00000001, 0x80000001, 0x7f7fffff, 0x00800000};
    static const std::uint64_t f64s[] = {0x0,
                                         0x8000000000000000,
                                         0x7ff0000000000000,
                                         0xfff0000000000000,
                                         0x7ff8000000000000,
                                         0xfff8000000000000,
                                         0x7ff0000000000001,
                                         0x7ff4000000012345,
                                         0x1,
                                         0x8000000000000001,
                                         0x7fefffffffffffff,
                                         0x0010000000000000};
    static const std::uint64_t f16s[] = {0x0,    0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00,
                                         0x7c01, 0x7d23, 0x0001, 0x8001, 0x7bff, 0x0400};
    static const std::uint64_t bf16s[] = {0x0,    0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0,
                                          0x7f81, 0x7fa1, 0x0001, 0x8001, 0x7f7f, 0x0080};
    const std::size_t k = rng() % 12;
    switch (dt) {
      case DataType::f32: return f32s[k];
      case DataType::f64: return f64s[k];
      case DataType::f16: return f16s[k];
      case DataType::bf16: return bf16s[k];
      default: return rng();
    }
  };
  const std::uint64_t mask = mask_for(dt);
  const bool floating = strata::is_floating(dt);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t x = 0, y = 0;
    const int p = pick(rng);
    if (!floating || p < 20) {  // arbitrary bits (all of integers' range)
      x = rng();
      y = rng();
    } else if (p < 60) {
      x = encode(moderate(rng));
      y = encode(moderate(rng));
    } else if (p < 80) {
      x = special();
      y = p < 70 ? special() : encode(moderate(rng));
    } else if (p < 90) {
      x = encode(moderate(rng));
      y = x;
    } else {  // +0 and -0, in either order
      const std::uint64_t sign = 1ull << (8 * strata::dtype_size(dt) - 1);
      x = p % 2 ? sign : 0;
      y = x ^ sign;
    }
    if (pick(rng) < 50) std::swap(x, y);
    a.set(i, x & mask);
    b.set(i, y & mask);
  }
}

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string label(Isa isa, DataType dt, ReduceOp op, std::size_t n) {
  return std::string(coll::to_string(isa)) + " " + strata::to_string(dt) + " " +
         strata::to_string(op) + " n=" + std::to_string(n);
}

// Expects out[i] == ref(a[i], b[i]) for all i; reports the first mismatch only.
void expect_matches(DataType dt, ReduceOp op, const Buffer& a, const Buffer& b, const Buffer& out,
                    std::size_t n, const std::string& what) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t want = ref_elem(dt, op, a.get(i), b.get(i));
    if (out.get(i) != want) {
      ADD_FAILURE() << what << ": element " << i << " of " << n << ": " << hex(a.get(i)) << " op "
                    << hex(b.get(i)) << " gave " << hex(out.get(i)) << ", want " << hex(want);
      return;
    }
  }
}

// ---- reduce ----

class ReduceKernels : public ::testing::TestWithParam<Isa> {};

TEST_P(ReduceKernels, EveryTypeAndOpMatchesModel) {
  const Isa isa = GetParam();
  std::mt19937_64 rng(42);
  for (DataType dt : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!valid_combo(dt, op)) continue;
      for (std::size_t n : kSizes) {
        Buffer a(dt, n), b(dt, n), out(dt, n);
        fill_pair(dt, a, b, n, rng);
        coll::reduce(isa, dt, op, out.data(), a.data(), b.data(), n);
        expect_matches(dt, op, a, b, out, n, label(isa, dt, op, n));
      }
    }
  }
}

// Start one element in, so the vector loops see a different alignment and remainder.
TEST_P(ReduceKernels, OffsetBuffers) {
  const Isa isa = GetParam();
  std::mt19937_64 rng(7);
  constexpr std::size_t n = 1000;
  for (DataType dt : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!valid_combo(dt, op)) continue;
      Buffer a(dt, n + 1), b(dt, n + 1), out(dt, n + 1);
      fill_pair(dt, a, b, n + 1, rng);
      const std::size_t e = strata::dtype_size(dt);
      coll::reduce(isa, dt, op, static_cast<char*>(out.data()) + e,
                   static_cast<char*>(a.data()) + e, static_cast<char*>(b.data()) + e, n);
      for (std::size_t i = 1; i <= n; ++i) {
        ASSERT_EQ(out.get(i), ref_elem(dt, op, a.get(i), b.get(i)))
            << label(isa, dt, op, n) << " element " << i;
      }
    }
  }
}

TEST_P(ReduceKernels, InPlaceAliasing) {
  const Isa isa = GetParam();
  std::mt19937_64 rng(1234);
  for (DataType dt : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!valid_combo(dt, op)) continue;
      for (std::size_t n : kSizes) {
        Buffer a(dt, n), b(dt, n);
        fill_pair(dt, a, b, n, rng);
        const std::string what = label(isa, dt, op, n);

        Buffer io = a;  // out == a
        coll::reduce(isa, dt, op, io.data(), io.data(), b.data(), n);
        expect_matches(dt, op, a, b, io, n, what + " out==a");

        io = b;  // out == b
        coll::reduce(isa, dt, op, io.data(), a.data(), io.data(), n);
        expect_matches(dt, op, a, b, io, n, what + " out==b");

        io = a;  // out == a == b
        coll::reduce(isa, dt, op, io.data(), io.data(), io.data(), n);
        expect_matches(dt, op, a, a, io, n, what + " out==a==b");

        Buffer out(dt, n);  // a == b, out separate
        coll::reduce(isa, dt, op, out.data(), a.data(), a.data(), n);
        expect_matches(dt, op, a, a, out, n, what + " a==b");
      }
    }
  }
}

// Ranks pair partial results in different orders; any asymmetry would make them disagree.
TEST_P(ReduceKernels, OperandOrderIndependent) {
  const Isa isa = GetParam();
  std::mt19937_64 rng(99);
  constexpr std::size_t n = 4099;
  for (DataType dt : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!valid_combo(dt, op)) continue;
      Buffer a(dt, n), b(dt, n), ab(dt, n), ba(dt, n);
      fill_pair(dt, a, b, n, rng);
      coll::reduce(isa, dt, op, ab.data(), a.data(), b.data(), n);
      coll::reduce(isa, dt, op, ba.data(), b.data(), a.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(ab.get(i), ba.get(i)) << label(isa, dt, op, n) << " element " << i << ": "
                                        << hex(a.get(i)) << ", " << hex(b.get(i));
      }
    }
  }
}

TEST_P(ReduceKernels, FinishAvgMatchesModel) {
  const Isa isa = GetParam();
  std::mt19937_64 rng(5);
  for (DataType dt : kAllTypes) {
    if (!strata::is_floating(dt)) continue;
    for (int nranks : {1, 2, 3, 7, 64}) {
      for (std::size_t n : kSizes) {
        Buffer x(dt, n), unused(dt, n);
        fill_pair(dt, x, unused, n, rng);
        Buffer buf = x;
        coll::finish_avg(isa, dt, buf.data(), n, nranks);
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(buf.get(i), ref_avg(dt, x.get(i), nranks))
              << coll::to_string(isa) << " " << strata::to_string(dt) << " nranks=" << nranks
              << " element " << i << " input " << hex(x.get(i));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, ReduceKernels, ::testing::ValuesIn(supported_isas()),
                         [](const auto& info) { return std::string(coll::to_string(info.param)); });

TEST(ReduceKernelsDefault, UsesActiveVariant) {
  std::mt19937_64 rng(3);
  constexpr std::size_t n = 1000;
  Buffer a(DataType::f16, n), b(DataType::f16, n), out(DataType::f16, n);
  fill_pair(DataType::f16, a, b, n, rng);
  coll::reduce(DataType::f16, ReduceOp::sum, out.data(), a.data(), b.data(), n);
  expect_matches(DataType::f16, ReduceOp::sum, a, b, out, n, "default f16 sum");
  EXPECT_TRUE(coll::isa_supported(coll::active_isa()));
}

TEST(ReduceKernelsErrors, RejectsBadArguments) {
  float x[4] = {}, y[4] = {}, z[4] = {};
  std::int32_t i[4] = {};
  EXPECT_THROW(coll::reduce(DataType::i32, ReduceOp::avg, i, i, i, 4), strata::InvalidArgument);
  EXPECT_THROW(coll::reduce(DataType::i32, ReduceOp::avg, i, i, i, 0), strata::InvalidArgument);
  EXPECT_THROW(coll::finish_avg(DataType::i64, i, 2, 2), strata::InvalidArgument);
  EXPECT_THROW(coll::finish_avg(DataType::f32, x, 4, 0), strata::InvalidArgument);
  EXPECT_THROW(coll::reduce(static_cast<DataType>(42), ReduceOp::sum, x, y, z, 4),
               strata::InvalidArgument);
  EXPECT_THROW(coll::reduce(DataType::f32, static_cast<ReduceOp>(9), x, y, z, 4),
               strata::InvalidArgument);
  EXPECT_THROW(coll::reduce(DataType::f32, ReduceOp::sum, nullptr, y, z, 4),
               strata::InvalidArgument);
  EXPECT_THROW(coll::reduce(DataType::f32, ReduceOp::sum, reinterpret_cast<char*>(x) + 1, y, z, 2),
               strata::InvalidArgument);
  EXPECT_THROW(coll::reduce(DataType::f32, ReduceOp::sum, x + 1, x, z, 3),  // partial overlap
               strata::InvalidArgument);
  // Nothing to do: null buffers are fine.
  EXPECT_NO_THROW(coll::reduce(DataType::f32, ReduceOp::sum, nullptr, nullptr, nullptr, 0));
  EXPECT_NO_THROW(coll::finish_avg(DataType::f16, nullptr, 0, 3));
}

// ---- f16 / bf16 conversions ----

TEST(HalfConversion, ExhaustiveDecodeMatchesModel) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const double want = decode(kHalf, bits);
    const float got = core::f16_to_float(bits);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << hex(h);
      // Quieted, payload kept (as vcvtph2ps does).
      const std::uint32_t u = std::bit_cast<std::uint32_t>(got);
      ASSERT_EQ(u, ((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13)) << hex(h);
    } else {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got),
                std::bit_cast<std::uint32_t>(static_cast<float>(want)))
          << hex(h);
    }
#ifdef __FLT16_MANT_DIG__  // the compiler has _Float16 on this target (gcc 12; not clang 14)
    // A third opinion: the compiler's own _Float16.
    const float compiler = static_cast<float>(std::bit_cast<_Float16>(bits));
    if (!std::isnan(want)) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(compiler));
    }
#endif
  }
}

TEST(HalfConversion, ExhaustiveRoundTrip) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const std::uint16_t back = core::float_to_f16(core::f16_to_float(bits));
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) {
      ASSERT_EQ(back & 0x7c00u, 0x7c00u) << hex(h);
      ASSERT_NE(back & 0x3ffu, 0u) << hex(h) << " NaN became infinity";
      ASSERT_EQ(back, h | 0x200u) << hex(h) << " NaN payload or sign lost";
    } else {
      ASSERT_EQ(back, bits) << hex(h);
    }
    EXPECT_EQ(core::to_f16(core::to_float(core::f16{bits})).bits, back);
  }
}

TEST(Bf16Conversion, ExhaustiveRoundTrip) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = core::bf16_to_float(bits);
    const double want = decode(kBf16, bits);
    const std::uint16_t back = core::float_to_bf16(f);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << hex(h);
      ASSERT_EQ(back, h | 0x40u) << hex(h) << " NaN must stay NaN, quieted";
    } else {
      ASSERT_EQ(static_cast<double>(f), want) << hex(h);
      ASSERT_EQ(back, bits) << hex(h);
    }
    EXPECT_EQ(core::to_bf16(core::to_float(core::bf16{bits})).bits, back);
  }
}

// Every midpoint between neighbouring finite values must round to the even neighbour, and
// anything a hair off the midpoint to the nearer one. Covers subnormals, the normal/
// subnormal boundary and overflow to infinity (the midpoint above max_finite).
template <class Encode>
void check_ties(const NarrowFormat& fmt, Encode encode) {
  const int bias = (1 << (fmt.exp_bits - 1)) - 1;
  for (std::uint16_t h = 0; h <= fmt.max_finite; ++h) {
    for (std::uint16_t sign : {std::uint16_t{0}, std::uint16_t{0x8000}}) {
      const auto lo = static_cast<std::uint16_t>(h | sign);
      const auto up = static_cast<std::uint16_t>((h + 1) | sign);
      const double s = sign ? -1.0 : 1.0;
      const double vlo = decode(fmt, lo);
      // Above max_finite the neighbour is the power of two the format cannot hold.
      const double vup = up == (fmt.inf | sign) ? s * std::ldexp(1.0, bias + 1) : decode(fmt, up);
      const float mid = static_cast<float>((vlo + vup) / 2);
      ASSERT_EQ(static_cast<double>(mid), (vlo + vup) / 2) << "midpoint not exact";
      ASSERT_EQ(encode(mid), (h & 1) ? up : lo) << "tie above " << hex(lo);
      const float inf = std::numeric_limits<float>::infinity();
      ASSERT_EQ(encode(std::nextafter(mid, 0.0f)), lo) << "just above " << hex(lo);
      ASSERT_EQ(encode(std::nextafter(mid, sign ? -inf : inf)), up) << "just below " << hex(up);
    }
  }
}

TEST(HalfConversion, TiesToEven) {
  check_ties(kHalf, [](float f) { return core::float_to_f16(f); });
  EXPECT_EQ(core::float_to_f16(65519.996f), 0x7bff);
  EXPECT_EQ(core::float_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(core::float_to_f16(1e30f), 0x7c00);
  EXPECT_EQ(core::float_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(core::float_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(core::float_to_f16(-0.0f), 0x8000);
}

TEST(Bf16Conversion, TiesToEven) {
  check_ties(kBf16, [](float f) { return core::float_to_bf16(f); });
  // A NaN whose payload lives only in the bits that are dropped must not become infinity.
  EXPECT_EQ(core::float_to_bf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(core::float_to_bf16(std::bit_cast<float>(0xff800001u)), 0xffc0);
}

// A wide sweep of float bit patterns (every NaN class and rounding case included) against
// the compiler's _Float16 and the bf16 model.
TEST(HalfConversion, FloatSweepMatchesCompiler) {
#ifndef __FLT16_MANT_DIG__
  GTEST_SKIP() << "this compiler has no _Float16 on this target";
#else
  for (std::uint64_t u = 0; u <= 0xffffffffu; u += 2459) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(u));
    const std::uint16_t got = core::float_to_f16(f);
    if (std::isnan(f)) {
      ASSERT_EQ(got, ((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu)) << hex(u);
    } else {
      ASSERT_EQ(got, std::bit_cast<std::uint16_t>(static_cast<_Float16>(f))) << hex(u);
    }
  }
#endif
}

TEST(Bf16Conversion, FloatSweepMatchesModel) {
  for (std::uint64_t u = 0; u <= 0xffffffffu; u += 65521) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(u));
    const std::uint16_t got = core::float_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_EQ(got, (u >> 16) | 0x40u) << hex(u);
    } else {
      ASSERT_EQ(got, round_to(kBf16, f)) << hex(u);
    }
  }
}

// The portable code must equal the F16C instructions bit for bit, NaNs included, or ranks
// on different CPUs could disagree.
TEST(HalfConversion, PortableMatchesF16c) {
#ifdef STRATA_HAVE_F16C_TARGET
  if (!core::cpu_has_f16c()) GTEST_SKIP() << "CPU has no F16C";
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(core::f16_to_float(bits)),
              std::bit_cast<std::uint32_t>(core::f16_to_float_f16c(bits)))
        << hex(h);
  }
  for (std::uint64_t u = 0; u <= 0xffffffffu; u += 257) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(u));
    ASSERT_EQ(core::float_to_f16(f), core::float_to_f16_f16c(f)) << hex(u);
  }
#else
  GTEST_SKIP() << "not an x86 build";
#endif
}

// ---- names ----

TEST(Types, NamesRoundTrip) {
  const char* nccl[] = {"float", "double", "half", "bfloat16", "int8", "uint8", "int32", "int64"};
  const std::size_t sizes[] = {4, 8, 2, 2, 1, 1, 4, 8};
  for (int i = 0; i < strata::kNumDataTypes; ++i) {
    const auto dt = static_cast<DataType>(i);
    EXPECT_EQ(strata::parse_dtype(strata::to_string(dt)), dt);
    EXPECT_EQ(strata::parse_dtype(nccl[i]), dt);
    EXPECT_EQ(strata::dtype_size(dt), sizes[i]);
    EXPECT_EQ(strata::is_floating(dt), i < 4);
  }
  for (int i = 0; i < strata::kNumReduceOps; ++i) {
    const auto op = static_cast<ReduceOp>(i);
    EXPECT_EQ(strata::parse_op(strata::to_string(op)), op);
  }
  EXPECT_STREQ(strata::to_string(DataType::bf16), "bf16");
  EXPECT_STREQ(strata::to_string(ReduceOp::avg), "avg");
  EXPECT_STREQ(strata::to_string(strata::CollectiveKind::reduce_scatter), "reduce_scatter");
  EXPECT_STREQ(strata::to_string(strata::CollectiveKind::recv), "recv");
  EXPECT_EQ(strata::parse_dtype("f128"), std::nullopt);
  EXPECT_EQ(strata::parse_dtype(""), std::nullopt);
  EXPECT_EQ(strata::parse_op("mean"), std::nullopt);
  EXPECT_STREQ(strata::to_string(static_cast<DataType>(200)), "unknown");
  EXPECT_FALSE(strata::is_floating(static_cast<DataType>(200)));
  EXPECT_THROW(strata::dtype_size(static_cast<DataType>(200)), strata::InvalidArgument);
}

}  // namespace
