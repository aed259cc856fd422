#include "kernels/reduce.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <type_traits>

#include "base/half.hpp"
#include "strata/errors.hpp"

namespace strata::kernels {
namespace {

// ---- NaN policy ----
//
// Operations below may yield any NaN; every codec's store() then replaces it with the one
// canonical quiet NaN. x86 propagates the first operand's payload and invents a negative
// NaN for inf - inf, other CPUs differ again; one fixed NaN makes results independent of
// operand order and of the machine.

template <class F>
struct FloatBits;
template <>
struct FloatBits<float> {
  using U = std::uint32_t;
  static constexpr U kQuietNaN = 0x7fc00000u;
};
template <>
struct FloatBits<double> {
  using U = std::uint64_t;
  static constexpr U kQuietNaN = 0x7ff8000000000000u;
};

inline constexpr std::uint16_t kF16QuietNaN = 0x7e00;   // what kQuietNaN<float> rounds to
inline constexpr std::uint16_t kBf16QuietNaN = 0x7fc0;  // likewise

// ---- element codecs: how a stored element widens to the type arithmetic happens in ----

template <class T>
struct Plain {
  using Storage = T;
  using Compute = T;
  [[gnu::always_inline]] static T load(T v) { return v; }
  [[gnu::always_inline]] static T store(T v) {
    if constexpr (std::is_floating_point_v<T>) {
      return v != v ? std::bit_cast<T>(FloatBits<T>::kQuietNaN) : v;
    } else {
      return v;
    }
  }
};

// The NaN fix-up happens on the rounded bits, after all FP work. Doing it on the float
// first makes GCC thread the constant NaN through the rounding code, which leaves FP
// arithmetic in a conditional block that -ftrapping-math will not vectorize.
struct Half {
  using Storage = std::uint16_t;
  using Compute = float;
  [[gnu::always_inline]] static float load(std::uint16_t v) { return core::f16_to_float(v); }
  [[gnu::always_inline]] static std::uint16_t store(float v) {
    return static_cast<std::uint16_t>(
        core::detail::blend(v != v, kF16QuietNaN, core::float_to_f16(v)));
  }
};

struct BFloat {
  using Storage = std::uint16_t;
  using Compute = float;
  [[gnu::always_inline]] static float load(std::uint16_t v) { return core::bf16_to_float(v); }
  [[gnu::always_inline]] static std::uint16_t store(float v) {
    return static_cast<std::uint16_t>(
        core::detail::blend(v != v, kBf16QuietNaN, core::float_to_bf16(v)));
  }
};

// ---- operations ----

// Integers widen to an unsigned type of at least 32 bits: unsigned so overflow wraps
// instead of being undefined, and at least int-sized so promotion cannot sneak a signed
// multiply back in.
template <class T>
using WrapInt = std::conditional_t<(sizeof(T) <= 4), std::uint32_t, std::uint64_t>;

struct Sum {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return a + b;
    } else {
      return static_cast<T>(static_cast<WrapInt<T>>(a) + static_cast<WrapInt<T>>(b));
    }
  }
};

struct Prod {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return a * b;
    } else {
      return static_cast<T>(static_cast<WrapInt<T>>(a) * static_cast<WrapInt<T>>(b));
    }
  }
};

// Floats. Each ternary alone is a single vminps/vmaxps, but for equal operands (+0 vs -0)
// and NaNs x86 answers with the second operand, so its result depends on operand order.
// Taking it both ways round and combining the bits removes that: for ordered, unequal
// operands both agree; for +0/-0, OR (min) picks -0 and AND (max) picks +0; for a NaN
// (where each form returns the other operand) OR keeps every exponent and payload bit set,
// so the result is a NaN, which store() then canonicalizes. AND would not keep the NaN, so
// max handles that case explicitly.
struct Min {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      using U = typename FloatBits<T>::U;
      const T lo1 = a < b ? a : b;
      const T lo2 = b < a ? b : a;
      return std::bit_cast<T>(std::bit_cast<U>(lo1) | std::bit_cast<U>(lo2));
    } else {
      return a < b ? a : b;
    }
  }
};

struct Max {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      using U = typename FloatBits<T>::U;
      const T hi1 = a > b ? a : b;
      const T hi2 = b > a ? b : a;
      const T r = std::bit_cast<T>(std::bit_cast<U>(hi1) & std::bit_cast<U>(hi2));
      const T nan = std::bit_cast<T>(std::bit_cast<U>(a) | std::bit_cast<U>(b));
      // Selecting between T values (not U) keeps the f64 loop vectorizable on SSE2.
      return ((a != a) | (b != b)) ? nan : r;
    } else {
      return a > b ? a : b;
    }
  }
};

// ---- loops ----
//
// Each aliasing pattern gets its own loop so every pointer that is written can be
// __restrict. The loops then vectorize unconditionally: no runtime overlap test, no scalar
// fallback copy, nothing that depends on the vectorizer's versioning heuristics.

template <class Codec, class Op>
[[gnu::always_inline]] inline void loop_distinct(typename Codec::Storage* __restrict out,
                                                 const typename Codec::Storage* __restrict a,
                                                 const typename Codec::Storage* __restrict b,
                                                 std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = Codec::store(Op::apply(Codec::load(a[i]), Codec::load(b[i])));
  }
}

// io is the first operand when kIoIsFirst, else the second; the order is kept even though
// every op is commutative, so the kernels never depend on that proof.
template <class Codec, class Op, bool kIoIsFirst>
[[gnu::always_inline]] inline void loop_inplace(typename Codec::Storage* __restrict io,
                                                const typename Codec::Storage* __restrict other,
                                                std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = Codec::load(io[i]);
    const auto y = Codec::load(other[i]);
    io[i] = Codec::store(kIoIsFirst ? Op::apply(x, y) : Op::apply(y, x));
  }
}

template <class Codec, class Op>
[[gnu::always_inline]] inline void loop_self(typename Codec::Storage* __restrict io,
                                             std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = Codec::load(io[i]);
    io[i] = Codec::store(Op::apply(x, x));
  }
}

template <class Codec, class Op>
[[gnu::always_inline]] inline void combine_body(void* out, const void* a, const void* b,
                                                std::size_t n) {
  using S = typename Codec::Storage;
  auto* o = static_cast<S*>(out);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  if (o != x && o != y) {
    loop_distinct<Codec, Op>(o, x, y, n);
  } else if (o != y) {
    loop_inplace<Codec, Op, true>(o, y, n);
  } else if (o != x) {
    loop_inplace<Codec, Op, false>(o, x, n);
  } else {
    loop_self<Codec, Op>(o, n);
  }
}

template <class Codec>
[[gnu::always_inline]] inline void avg_body(void* buf, std::size_t n, int nranks) {
  using S = typename Codec::Storage;
  using C = typename Codec::Compute;
  auto* __restrict p = static_cast<S*>(buf);
  const C d = static_cast<C>(nranks);
  // A true division, not a multiply by 1/nranks: it rounds once, so avg of equal values
  // is that value for any rank count.
  for (std::size_t i = 0; i < n; ++i) p[i] = Codec::store(Codec::load(p[i]) / d);
}

// ---- instruction-set variants ----
//
// The bodies above compiled twice: once for the baseline x86-64 the library is built for,
// once for AVX2 + F16C, chosen at run time (f16/bf16 get hand-written conversions in the
// latter, below). Every step is a single correctly rounded IEEE operation per element -- no
// FMA is enabled, nothing is reassociated -- so all variants give identical bits.

using CombineFn = void (*)(void*, const void*, const void*, std::size_t);
using AvgFn = void (*)(void*, std::size_t, int);

struct Generic {
  template <class Codec, class Op>
  static void combine(void* out, const void* a, const void* b, std::size_t n) {
    combine_body<Codec, Op>(out, a, b, n);
  }
  template <class Codec>
  static void avg(void* buf, std::size_t n, int nranks) {
    avg_body<Codec>(buf, n, nranks);
  }
};

#ifdef STRATA_KERNELS_AVX2

// f16 and bf16 in the AVX2 variant. GCC 12 does not vectorize float<->f16 conversions at
// all (F16C does each in one instruction), and its auto-vectorized bf16 rounding shuffles
// 16-bit lanes around three times more than needed. So the conversions are spelled with
// intrinsics over L1-sized blocks, and the arithmetic between them is the same
// auto-vectorized loop f32 uses. Tails use the portable codecs, which give the same bits
// (the tests compare every variant against one model).
constexpr std::size_t kBlock = 512;

struct F16cConv {
  [[gnu::target("avx2,f16c")]] static void widen(const std::uint16_t* src, float* dst,
                                                 std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      _mm256_store_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; ++i) dst[i] = Half::load(src[i]);
  }
  [[gnu::target("avx2,f16c")]] static void narrow(const float* src, std::uint16_t* dst,
                                                  std::size_t n) {
    const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(FloatBits<float>::kQuietNaN));
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256 v = _mm256_load_ps(src + i);
      v = _mm256_blendv_ps(v, qnan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; ++i) dst[i] = Half::store(src[i]);
  }
};

struct Bf16Avx2Conv {
  [[gnu::target("avx2")]] static void widen(const std::uint16_t* src, float* dst, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i),
                         _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    for (; i < n; ++i) dst[i] = BFloat::load(src[i]);
  }
  // core::float_to_bf16's rounding on 32-bit lanes, with the canonical NaN blended in.
  [[gnu::target("avx2")]] static __m256i round(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(r, _mm256_set1_epi32(kBf16QuietNaN), nan);
  }
  [[gnu::target("avx2")]] static void narrow(const float* src, std::uint16_t* dst, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256i lo = round(_mm256_load_ps(src + i));
      const __m256i hi = round(_mm256_load_ps(src + i + 8));
      // packus works within 128-bit lanes; the permute puts the four quarters in order.
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
    }
    for (; i < n; ++i) dst[i] = BFloat::store(src[i]);
  }
};

// Each block reads both inputs before writing its output, so exact aliasing is harmless.
template <class Conv, class Op>
[[gnu::target("avx2,f16c")]] void combine_blocked(void* out, const void* a, const void* b,
                                                  std::size_t n) {
  auto* o = static_cast<std::uint16_t*>(out);
  const auto* x = static_cast<const std::uint16_t*>(a);
  const auto* y = static_cast<const std::uint16_t*>(b);
  alignas(32) float xf[kBlock];
  alignas(32) float yf[kBlock];
  for (std::size_t base = 0; base < n; base += kBlock) {
    const std::size_t m = std::min(kBlock, n - base);
    Conv::widen(x + base, xf, m);
    Conv::widen(y + base, yf, m);
    for (std::size_t i = 0; i < m; ++i) xf[i] = Op::apply(xf[i], yf[i]);
    Conv::narrow(xf, o + base, m);
  }
}

template <class Conv>
[[gnu::target("avx2,f16c")]] void avg_blocked(void* buf, std::size_t n, int nranks) {
  auto* p = static_cast<std::uint16_t*>(buf);
  const float d = static_cast<float>(nranks);
  alignas(32) float f[kBlock];
  for (std::size_t base = 0; base < n; base += kBlock) {
    const std::size_t m = std::min(kBlock, n - base);
    Conv::widen(p + base, f, m);
    for (std::size_t i = 0; i < m; ++i) f[i] /= d;
    Conv::narrow(f, p + base, m);
  }
}

struct Avx2 {
  template <class Codec, class Op>
  [[gnu::target("avx2,f16c")]] static void combine(void* out, const void* a, const void* b,
                                                   std::size_t n) {
    if constexpr (std::is_same_v<Codec, Half>) {
      combine_blocked<F16cConv, Op>(out, a, b, n);
    } else if constexpr (std::is_same_v<Codec, BFloat>) {
      combine_blocked<Bf16Avx2Conv, Op>(out, a, b, n);
    } else {
      combine_body<Codec, Op>(out, a, b, n);
    }
  }
  template <class Codec>
  [[gnu::target("avx2,f16c")]] static void avg(void* buf, std::size_t n, int nranks) {
    if constexpr (std::is_same_v<Codec, Half>) {
      avg_blocked<F16cConv>(buf, n, nranks);
    } else if constexpr (std::is_same_v<Codec, BFloat>) {
      avg_blocked<Bf16Avx2Conv>(buf, n, nranks);
    } else {
      avg_body<Codec>(buf, n, nranks);
    }
  }
};
#else
using Avx2 = Generic;  // never selected: isa_supported(avx2) is false
#endif

struct Table {
  CombineFn combine[kNumDataTypes][kNumReduceOps]{};
  AvgFn avg[kNumDataTypes]{};
};

template <class Variant, class Codec>
constexpr void fill(Table& t, DataType dt) {
  const auto d = static_cast<std::size_t>(dt);
  auto& row = t.combine[d];
  row[static_cast<std::size_t>(ReduceOp::sum)] = &Variant::template combine<Codec, Sum>;
  row[static_cast<std::size_t>(ReduceOp::prod)] = &Variant::template combine<Codec, Prod>;
  row[static_cast<std::size_t>(ReduceOp::min)] = &Variant::template combine<Codec, Min>;
  row[static_cast<std::size_t>(ReduceOp::max)] = &Variant::template combine<Codec, Max>;
  if constexpr (std::is_floating_point_v<typename Codec::Compute>) {
    row[static_cast<std::size_t>(ReduceOp::avg)] = &Variant::template combine<Codec, Sum>;
    t.avg[d] = &Variant::template avg<Codec>;
  }
}

template <class Variant>
constexpr Table make_table() {
  Table t;
  fill<Variant, Plain<float>>(t, DataType::f32);
  fill<Variant, Plain<double>>(t, DataType::f64);
  fill<Variant, Half>(t, DataType::f16);
  fill<Variant, BFloat>(t, DataType::bf16);
  fill<Variant, Plain<std::int8_t>>(t, DataType::i8);
  fill<Variant, Plain<std::uint8_t>>(t, DataType::u8);
  fill<Variant, Plain<std::int32_t>>(t, DataType::i32);
  fill<Variant, Plain<std::int64_t>>(t, DataType::i64);
  return t;
}

constexpr Table kGenericTable = make_table<Generic>();
constexpr Table kAvx2Table = make_table<Avx2>();

const Table& table_for(Isa isa) {
  return isa == Isa::avx2 ? kAvx2Table : kGenericTable;
}

// ---- argument checks ----

std::size_t checked_index(DataType dt, const char* what) {
  const auto d = static_cast<std::size_t>(dt);
  if (d >= static_cast<std::size_t>(kNumDataTypes)) {
    throw InvalidArgument(std::string(what) + ": unknown data type " +
                          std::to_string(static_cast<int>(dt)));
  }
  return d;
}

void check_isa(Isa isa, const char* what) {
  if (!isa_supported(isa)) {
    throw InvalidArgument(std::string(what) + ": kernel variant " + to_string(isa) +
                          " is not supported by this CPU");
  }
}

void check_buffer(const void* p, std::size_t elem, const char* what, const char* name) {
  if (p == nullptr) throw InvalidArgument(std::string(what) + ": " + name + " is null");
  // Vectorized loops may assume natural alignment; a misaligned buffer would fault there.
  if (reinterpret_cast<std::uintptr_t>(p) % elem != 0) {
    throw InvalidArgument(std::string(what) + ": " + name + " is not aligned to " +
                          std::to_string(elem) + " bytes");
  }
}

bool partially_overlap(const void* p, const void* q, std::size_t bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(p);
  const auto y = reinterpret_cast<std::uintptr_t>(q);
  return x != y && x < y + bytes && y < x + bytes;
}

}  // namespace

void reduce(Isa isa, DataType dt, ReduceOp op, void* out, const void* a, const void* b,
            std::size_t n) {
  constexpr const char* what = "reduce";
  const std::size_t d = checked_index(dt, what);
  const auto o = static_cast<std::size_t>(op);
  if (o >= static_cast<std::size_t>(kNumReduceOps)) {
    throw InvalidArgument(std::string(what) + ": unknown reduce op " +
                          std::to_string(static_cast<int>(op)));
  }
  check_isa(isa, what);
  const CombineFn fn = table_for(isa).combine[d][o];
  if (fn == nullptr) {
    throw InvalidArgument(std::string(what) + ": op " + to_string(op) +
                          " is not defined for data type " + to_string(dt));
  }
  if (n == 0) return;
  const std::size_t elem = dtype_size(dt);
  check_buffer(out, elem, what, "out");
  check_buffer(a, elem, what, "a");
  check_buffer(b, elem, what, "b");
  const std::size_t bytes = n * elem;
  if (partially_overlap(out, a, bytes) || partially_overlap(out, b, bytes)) {
    throw InvalidArgument(std::string(what) +
                          ": out partially overlaps an input (only exact aliasing is allowed)");
  }
  fn(out, a, b, n);
}

void reduce(DataType dt, ReduceOp op, void* out, const void* a, const void* b, std::size_t n) {
  reduce(active_isa(), dt, op, out, a, b, n);
}

void finish_avg(Isa isa, DataType dt, void* buf, std::size_t n, int nranks) {
  constexpr const char* what = "finish_avg";
  const std::size_t d = checked_index(dt, what);
  check_isa(isa, what);
  const AvgFn fn = table_for(isa).avg[d];
  if (fn == nullptr) {
    throw InvalidArgument(std::string(what) + ": avg is not defined for data type " +
                          to_string(dt));
  }
  if (nranks < 1) {
    throw InvalidArgument(std::string(what) + ": nranks must be positive, got " +
                          std::to_string(nranks));
  }
  if (n == 0) return;
  check_buffer(buf, dtype_size(dt), what, "buf");
  fn(buf, n, nranks);
}

void finish_avg(DataType dt, void* buf, std::size_t n, int nranks) {
  finish_avg(active_isa(), dt, buf, n, nranks);
}

}  // namespace strata::kernels
