#include "perf_data.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "base/half.hpp"

namespace strata::perf {

namespace {

// How a type stores and reads back the pattern's integers. Integers convert modulo
// 2^bits, which is exactly how wrapped sums and products come out of the library.
template <class T>
struct Plain {
  using Storage = T;
  static Storage encode(std::int64_t v) { return static_cast<T>(v); }
  static double decode(Storage s) { return static_cast<double>(s); }
  static double epsilon() { return 0; }
};
struct Half {
  using Storage = std::uint16_t;
  static Storage encode(std::int64_t v) { return core::float_to_f16(static_cast<float>(v)); }
  static double decode(Storage s) { return core::f16_to_float(s); }
  static double epsilon() { return 0x1p-10; }
};
struct BFloat {
  using Storage = std::uint16_t;
  static Storage encode(std::int64_t v) { return core::float_to_bf16(static_cast<float>(v)); }
  static double decode(Storage s) { return core::bf16_to_float(s); }
  static double epsilon() { return 0x1p-7; }
};
struct Float : Plain<float> {
  static double epsilon() { return 0x1p-22; }
};
struct Double : Plain<double> {
  static double epsilon() { return 0x1p-51; }
};

template <class F>
decltype(auto) with_codec(DataType dt, F&& f) {
  switch (dt) {
    case DataType::f32: return f(Float{});
    case DataType::f64: return f(Double{});
    case DataType::f16: return f(Half{});
    case DataType::bf16: return f(BFloat{});
    case DataType::i8: return f(Plain<std::int8_t>{});
    case DataType::u8: return f(Plain<std::uint8_t>{});
    case DataType::i32: return f(Plain<std::int32_t>{});
    case DataType::i64: return f(Plain<std::int64_t>{});
  }
  throw std::invalid_argument("unknown data type");
}

template <class Codec>
bool matches(typename Codec::Storage got, std::int64_t combined, const Pattern& p) {
  if (p.op() != ReduceOp::avg) return got == Codec::encode(combined);
  // avg is floating only: one division, rounded once in the type (or in f32 for the
  // 16-bit types); allow that rounding rather than assume how the library divides.
  const double want = static_cast<double>(combined) / p.nranks();
  const double have = Codec::decode(got);
  return std::abs(have - want) <= Codec::epsilon() * std::max(1.0, std::abs(want));
}

}  // namespace

const char* nccl_type_name(DataType dt) {
  switch (dt) {
    case DataType::f32: return "float";
    case DataType::f64: return "double";
    case DataType::f16: return "half";
    case DataType::bf16: return "bfloat16";
    case DataType::i8: return "int8";
    case DataType::u8: return "uint8";
    case DataType::i32: return "int32";
    case DataType::i64: return "int64";
  }
  return "unknown";
}

std::vector<DataType> all_dtypes() {
  return {DataType::i8,  DataType::u8,  DataType::i32, DataType::i64,
          DataType::f16, DataType::f32, DataType::f64, DataType::bf16};
}

std::vector<ReduceOp> all_ops() {
  return {ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg};
}

bool op_supported(ReduceOp op, DataType dt) { return op != ReduceOp::avg || is_floating(dt); }

Pattern::Pattern(int nranks, ReduceOp op, int seed)
    : nranks_(std::max(nranks, 1)),
      op_(op),
      seed_(seed),
      // Sums stay within 256, where bf16 (8 significant bits) is still exact, for up to
      // 256 ranks; beyond that bf16 and f16 sums may round and be reported wrong.
      max_value_(std::clamp(256 / std::max(nranks, 1), 1, 4)),
      prod_period_(std::max(nranks, 8)) {}

std::int64_t Pattern::value(int rank, std::size_t index) const {
  const std::size_t i = index + static_cast<std::size_t>(seed_);
  if (op_ == ReduceOp::prod) {
    // Mostly ones and a rare two: products stay 1 or 2 and never overflow any type.
    return (i + static_cast<std::size_t>(rank)) % static_cast<std::size_t>(prod_period_) == 0 ? 2 : 1;
  }
  // A hash rather than a linear formula: linear ones make every rank's column sum to
  // the same constant for some rank counts, which would hide misplaced blocks.
  std::uint32_t x = static_cast<std::uint32_t>(i) * 0x9E3779B1u ^
                    static_cast<std::uint32_t>(rank + 1) * 0x85EBCA77u;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  return static_cast<std::int64_t>(x % static_cast<std::uint32_t>(max_value_ + 1));
}

std::int64_t Pattern::combined(std::size_t index) const {
  std::int64_t acc = value(0, index);
  for (int r = 1; r < nranks_; ++r) {
    const std::int64_t v = value(r, index);
    switch (op_) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
    }
  }
  return acc;
}

void fill(void* buf, DataType dt, std::size_t count, const Pattern& p, int rank, std::size_t first) {
  with_codec(dt, [&](auto codec) {
    using C = decltype(codec);
    auto* out = static_cast<typename C::Storage*>(buf);
    for (std::size_t i = 0; i < count; ++i) out[i] = C::encode(p.value(rank, first + i));
  });
}

std::int64_t count_wrong(const void* buf, DataType dt, std::size_t count, const Pattern& p,
                         const Expect& e) {
  return with_codec(dt, [&](auto codec) {
    using C = decltype(codec);
    const auto* in = static_cast<const typename C::Storage*>(buf);
    std::int64_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i) {
      bool ok = false;
      switch (e.kind) {
        case Expect::Kind::reduced:
          ok = matches<C>(in[i], p.combined(e.first + i), p);
          break;
        case Expect::Kind::from_rank:
          ok = in[i] == C::encode(p.value(e.rank, e.first + i));
          break;
        case Expect::Kind::gathered: {
          const std::size_t b = std::max<std::size_t>(e.block, 1);
          ok = in[i] == C::encode(p.value(static_cast<int>(i / b), i % b));
          break;
        }
        case Expect::Kind::exchanged: {
          const std::size_t b = std::max<std::size_t>(e.block, 1);
          ok = in[i] == C::encode(p.value(static_cast<int>(i / b), e.first + i % b));
          break;
        }
      }
      wrong += ok ? 0 : 1;
    }
    return wrong;
  });
}

}  // namespace strata::perf
