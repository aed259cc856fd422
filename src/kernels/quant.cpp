#include "kernels/quant.hpp"

#include <string>

#include "kernels/quant_body.hpp"
#include "strata/errors.hpp"

#include "kernels/isa.hpp"

#ifdef STRATA_KERNELS_AVX2
#include <immintrin.h>
#endif

namespace strata::kernels {
namespace {

struct Table {
  void (*quantize_int8)(const float*, std::size_t, std::size_t, const Rounding&, float*,
                        std::int8_t*);
  void (*quantize_int4)(const float*, std::size_t, std::size_t, const Rounding&, float*,
                        std::uint8_t*);
  void (*dequantize_int8[2])(const float*, const std::int8_t*, std::size_t, std::size_t, float*);
  void (*dequantize_int4[2])(const float*, const std::uint8_t*, std::size_t, std::size_t,
                             float*);
  void (*to_fp16)(const float*, std::size_t, std::uint16_t*);
  void (*to_bf16)(const float*, std::size_t, std::uint16_t*);
  void (*from_fp16)(const std::uint16_t*, std::size_t, float*, bool);
  void (*from_bf16)(const std::uint16_t*, std::size_t, float*, bool);
  void (*count_at_least)(const float*, std::size_t, const std::uint32_t*, int, std::uint64_t*);
  std::size_t (*extract_at_least)(const float*, std::size_t, std::uint32_t, std::uint32_t,
                                  std::uint32_t*);
};

namespace generic {
void quantize_int8(const float* x, std::size_t n, std::size_t block, const Rounding& r,
                   float* scales, std::int8_t* codes) {
  body::quantize_int8(x, n, block, r, scales, codes);
}
void quantize_int4(const float* x, std::size_t n, std::size_t block, const Rounding& r,
                   float* scales, std::uint8_t* codes) {
  body::quantize_int4(x, n, block, r, scales, codes);
}
template <bool kAdd>
void dequantize_int8(const float* s, const std::int8_t* c, std::size_t n, std::size_t block,
                     float* out) {
  body::dequantize_int8<kAdd>(s, c, n, block, out);
}
template <bool kAdd>
void dequantize_int4(const float* s, const std::uint8_t* c, std::size_t n, std::size_t block,
                     float* out) {
  body::dequantize_int4<kAdd>(s, c, n, block, out);
}
void to_fp16(const float* x, std::size_t n, std::uint16_t* out) { body::to_fp16(x, n, out); }
void to_bf16(const float* x, std::size_t n, std::uint16_t* out) { body::to_bf16(x, n, out); }
void from_fp16(const std::uint16_t* h, std::size_t n, float* out, bool add) {
  body::from_fp16(h, n, out, add);
}
void from_bf16(const std::uint16_t* h, std::size_t n, float* out, bool add) {
  body::from_bf16(h, n, out, add);
}
void count_at_least(const float* x, std::size_t n, const std::uint32_t* t, int nt,
                    std::uint64_t* counts) {
  body::count_at_least(x, n, t, nt, counts);
}
std::size_t extract_at_least(const float* x, std::size_t n, std::uint32_t t, std::uint32_t base,
                             std::uint32_t* out) {
  return body::extract_at_least(x, n, t, base, out);
}

constexpr Table kTable = {quantize_int8,   quantize_int4,
                          {dequantize_int8<false>, dequantize_int8<true>},
                          {dequantize_int4<false>, dequantize_int4<true>},
                          to_fp16,         to_bf16,
                          from_fp16,       from_bf16,
                          count_at_least,  extract_at_least};
}  // namespace generic

#ifdef STRATA_KERNELS_AVX2
// The same bodies, vectorized for AVX2 by the target attribute; fp16 and the index
// extraction are spelled with intrinsics because GCC does not vectorize them.
namespace avx2 {
#define STRATA_AVX2 [[gnu::target("avx2")]]
STRATA_AVX2 void quantize_int8(const float* x, std::size_t n, std::size_t block,
                               const Rounding& r, float* scales, std::int8_t* codes) {
  body::quantize_int8(x, n, block, r, scales, codes);
}
STRATA_AVX2 void quantize_int4(const float* x, std::size_t n, std::size_t block,
                               const Rounding& r, float* scales, std::uint8_t* codes) {
  body::quantize_int4(x, n, block, r, scales, codes);
}
template <bool kAdd>
STRATA_AVX2 void dequantize_int8(const float* s, const std::int8_t* c, std::size_t n,
                                 std::size_t block, float* out) {
  body::dequantize_int8<kAdd>(s, c, n, block, out);
}
template <bool kAdd>
STRATA_AVX2 void dequantize_int4(const float* s, const std::uint8_t* c, std::size_t n,
                                 std::size_t block, float* out) {
  body::dequantize_int4<kAdd>(s, c, n, block, out);
}
STRATA_AVX2 void to_bf16(const float* x, std::size_t n, std::uint16_t* out) {
  body::to_bf16(x, n, out);
}
STRATA_AVX2 void from_bf16(const std::uint16_t* h, std::size_t n, float* out, bool add) {
  body::from_bf16(h, n, out, add);
}
STRATA_AVX2 void count_at_least(const float* x, std::size_t n, const std::uint32_t* t, int nt,
                                std::uint64_t* counts) {
  body::count_at_least(x, n, t, nt, counts);
}

// vcvtps2ph rounds to nearest even and quiets NaNs exactly as core::float_to_f16 does.
[[gnu::target("avx2,f16c")]] void to_fp16(const float* x, std::size_t n, std::uint16_t* out) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = core::float_to_f16(x[i]);
}

[[gnu::target("avx2,f16c")]] void from_fp16(const std::uint16_t* h, std::size_t n, float* out,
                                            bool add) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  for (; i < n; ++i) {
    const float v = core::f16_to_float(h[i]);
    out[i] = add ? out[i] + v : v;
  }
}

[[gnu::target("avx2"), gnu::always_inline]] inline std::uint32_t select_mask8(
    const float* x, __m256i abs_mask, __m256i th) {
  const __m256i k = _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(x)), abs_mask);
  return static_cast<std::uint32_t>(
      _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(k, th))));
}

// For each 8-bit mask, the lane numbers of its set bits, packed to the front: a compress
// is then one permute-free add and an unaligned store of eight lanes, of which the first
// popcount(mask) count.
struct CompressTable {
  std::uint8_t lanes[256][8];
  constexpr CompressTable() : lanes{} {
    for (int m = 0; m < 256; ++m) {
      int c = 0;
      for (int b = 0; b < 8; ++b) {
        if (m & (1 << b)) lanes[m][c++] = static_cast<std::uint8_t>(b);
      }
    }
  }
};
constexpr CompressTable kCompress;

// Groups of 32 with no selected element (most of them at top-k densities) cost four
// compares and a test; groups with some store all four 8-lane parts compressed.
[[gnu::target("avx2,bmi,popcnt")]] std::size_t extract_at_least(const float* x, std::size_t n,
                                                                std::uint32_t t,
                                                                std::uint32_t base,
                                                                std::uint32_t* out) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i th = _mm256_set1_epi32(static_cast<std::int32_t>(t - 1));  // key > t - 1
  std::size_t c = 0;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const std::uint32_t m = select_mask8(x + i, abs_mask, th) |
                            select_mask8(x + i + 8, abs_mask, th) << 8 |
                            select_mask8(x + i + 16, abs_mask, th) << 16 |
                            select_mask8(x + i + 24, abs_mask, th) << 24;
    if (m == 0) continue;
    for (int part = 0; part < 4; ++part) {
      // Storing an empty part costs less than mispredicting whether it is empty.
      const std::uint32_t m8 = (m >> (8 * part)) & 0xffu;
      const __m256i lanes = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(kCompress.lanes[m8])));
      const __m256i idx = _mm256_add_epi32(
          lanes, _mm256_set1_epi32(static_cast<std::int32_t>(base + i + 8 * static_cast<std::size_t>(part))));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c), idx);
      c += static_cast<std::size_t>(_mm_popcnt_u32(m8));
    }
  }
  return c + body::extract_at_least(x + i, n - i, t, base + static_cast<std::uint32_t>(i), out + c);
}
#undef STRATA_AVX2

constexpr Table kTable = {quantize_int8,   quantize_int4,
                          {dequantize_int8<false>, dequantize_int8<true>},
                          {dequantize_int4<false>, dequantize_int4<true>},
                          to_fp16,         to_bf16,
                          from_fp16,       from_bf16,
                          count_at_least,  extract_at_least};
}  // namespace avx2
#endif

const Table* table_for(Isa isa) {
#ifdef STRATA_KERNELS_AVX2
  if (isa == Isa::avx2) return &avx2::kTable;
#endif
  (void)isa;
  return &generic::kTable;
}

const Table* current() { return table_for(active_isa()); }

}  // namespace

Rounding make_rounding(bool stochastic, std::uint64_t seed) {
  // Spread the 64-bit seed over both 32-bit keys so nearby seeds give unrelated draws.
  const std::uint32_t lo = body::mix32(static_cast<std::uint32_t>(seed) ^ 0x243f6a88u);
  const std::uint32_t hi = body::mix32(static_cast<std::uint32_t>(seed >> 32) + lo);
  return Rounding{stochastic, lo, body::mix32(hi ^ 0x85a308d3u)};
}

void quantize_int8(const float* x, std::size_t n, std::size_t block, const Rounding& r,
                   float* scales, std::int8_t* codes) {
  current()->quantize_int8(x, n, block, r, scales, codes);
}
void quantize_int4(const float* x, std::size_t n, std::size_t block, const Rounding& r,
                   float* scales, std::uint8_t* codes) {
  current()->quantize_int4(x, n, block, r, scales, codes);
}
void dequantize_int8(const float* scales, const std::int8_t* codes, std::size_t n,
                     std::size_t block, float* out, bool add) {
  current()->dequantize_int8[add ? 1 : 0](scales, codes, n, block, out);
}
void dequantize_int4(const float* scales, const std::uint8_t* codes, std::size_t n,
                     std::size_t block, float* out, bool add) {
  current()->dequantize_int4[add ? 1 : 0](scales, codes, n, block, out);
}
void to_fp16(const float* x, std::size_t n, std::uint16_t* out) { current()->to_fp16(x, n, out); }
void to_bf16(const float* x, std::size_t n, std::uint16_t* out) { current()->to_bf16(x, n, out); }
void from_fp16(const std::uint16_t* h, std::size_t n, float* out, bool add) {
  current()->from_fp16(h, n, out, add);
}
void from_bf16(const std::uint16_t* h, std::size_t n, float* out, bool add) {
  current()->from_bf16(h, n, out, add);
}
void count_at_least(const float* x, std::size_t n, const std::uint32_t* t, int nt,
                    std::uint64_t* counts) {
  current()->count_at_least(x, n, t, nt, counts);
}
std::size_t extract_at_least(const float* x, std::size_t n, std::uint32_t t, std::uint32_t base,
                             std::uint32_t* out) {
  return current()->extract_at_least(x, n, t, base, out);
}

}  // namespace strata::kernels
