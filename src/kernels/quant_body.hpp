// Loop bodies shared by the kernel variants (internal to kernels.cpp).
//
// Everything here is always_inline so that a variant compiled with a wider target attribute
// inlines it and vectorizes the loops for that target.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "base/half.hpp"
#include "kernels/quant.hpp"

namespace strata::kernels::body {

#define STRATA_QUANT_INLINE [[gnu::always_inline]] inline
// Lambdas too: an out-of-line copy would be compiled for the baseline target.
#define STRATA_QUANT_LAMBDA __attribute__((always_inline))

STRATA_QUANT_INLINE std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// A cheap full-avalanche 32-bit mixer (xor-shift / multiply rounds); each output bit
// depends on every input bit, which is all rounding needs.
STRATA_QUANT_INLINE std::uint32_t mix32(std::uint32_t h) {
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

// u in [0, 1) with 24 random bits. floor(x / scale + u) rounds up with probability equal
// to the fractional part, up to the float rounding of the sum: below 2^-16 of a step for
// |x / scale| <= 128, far under any effect on training.
STRATA_QUANT_INLINE float uniform(const Rounding& r, std::uint32_t i) {
  return static_cast<float>(mix32((i ^ r.s0) * 0x9e3779b1u + r.s1) >> 8) * 0x1p-24f;
}

// Adding and removing 1.5 * 2^23 leaves the value rounded to an integer in the current
// (nearest-even) mode, in plain SSE2 where nearbyint is a libm call. Valid for |v| < 2^22.
STRATA_QUANT_INLINE float round_even(float v) { return (v + 12582912.0f) - 12582912.0f; }

// Clamp written as compares that send a NaN to -qmax, so the int conversion after it is
// always defined.
STRATA_QUANT_INLINE float clamp_q(float v, float qmax) {
  v = v >= -qmax ? v : -qmax;
  return v <= qmax ? v : qmax;
}

STRATA_QUANT_INLINE std::int32_t floor_to_int(float v) {
  const std::int32_t t = static_cast<std::int32_t>(v);  // truncates toward zero
  return t - static_cast<std::int32_t>(static_cast<float>(t) > v);
}

inline constexpr std::uint32_t kFiniteLimit = 0x7f800000u;
// Below this magnitude kMax / amax could overflow; such blocks take the division path.
inline constexpr float kTinyMax = 0x1p-60f;

STRATA_QUANT_INLINE std::uint32_t block_max_key(const float* x, std::size_t m) {
  // Keys are below 2^31: a signed max vectorizes on more targets than an unsigned one.
  std::int32_t mk = 0;
  for (std::size_t j = 0; j < m; ++j) {
    mk = std::max(mk, static_cast<std::int32_t>(bits(x[j]) & 0x7fffffffu));
  }
  return static_cast<std::uint32_t>(mk);
}

// Quantizes m elements of a block whose largest magnitude key is mk into q (int32 lanes
// keep the loop a plain float->int conversion that vectorizes; callers narrow). `first` is
// the position of x[0] in the stream, which keys the stochastic draws. Returns the scale.
template <int kMax>
STRATA_QUANT_INLINE float quantize_piece(const float* x, std::size_t m, std::size_t first,
                                         std::uint32_t mk, const Rounding& r, std::int32_t* q) {
  constexpr float qmax = static_cast<float>(kMax);
  const float amax = std::bit_cast<float>(mk);
  const float scale = amax / qmax;
  const auto idx = static_cast<std::uint32_t>(first ^ (static_cast<std::uint64_t>(first) >> 32));
  if (mk >= kFiniteLimit) {
    for (std::size_t j = 0; j < m; ++j) q[j] = 0;
    return std::bit_cast<float>(0x7fc00000u);
  }
  if (amax < kTinyMax) {
    // Zero and tiny blocks are rare; a division keeps tiny ones as accurate as the rest
    // where qmax / amax would overflow.
    for (std::size_t j = 0; j < m; ++j) {
      const auto u = static_cast<std::uint32_t>(j);
      if (mk == 0) {
        q[j] = 0;
      } else if (r.stochastic) {
        q[j] = floor_to_int(clamp_q(x[j] / scale + uniform(r, idx + u), qmax));
      } else {
        q[j] = static_cast<std::int32_t>(round_even(clamp_q(x[j] / scale, qmax)));
      }
    }
    return scale;
  }
  // Finite x with |x| <= amax gives |x * inv| <= qmax (1 + 2^-22), which rounds into
  // range, so the float side needs no clamp (a float clamp is control flow GCC will not
  // vectorize under -ftrapping-math). A stochastic draw can reach qmax + 1 or -(qmax + 1):
  // that clamp is integer.
  const float inv = qmax / amax;
  if (r.stochastic) {
    for (std::size_t j = 0; j < m; ++j) {
      const float v = x[j] * inv + uniform(r, idx + static_cast<std::uint32_t>(j));
      q[j] = std::clamp(floor_to_int(v), -kMax, kMax);
    }
  } else {
    for (std::size_t j = 0; j < m; ++j) q[j] = static_cast<std::int32_t>(round_even(x[j] * inv));
  }
  return scale;
}

// Codes go through an int32 staging buffer of this many elements at a time.
inline constexpr std::size_t kStage = 1024;

// pack(q, first, m) narrows and stores m staged codes for stream positions [first, first+m).
template <int kMax, class Pack>
STRATA_QUANT_INLINE void quantize(const float* x, std::size_t n, std::size_t block,
                                  const Rounding& r, float* scales, Pack pack) {
  alignas(64) std::int32_t q[kStage];
  std::size_t b = 0;
  for (std::size_t base = 0; base < n; base += block, ++b) {
    const std::size_t len = std::min(block, n - base);
    const std::uint32_t mk = block_max_key(x + base, len);
    for (std::size_t off = 0; off < len; off += kStage) {
      const std::size_t m = std::min(kStage, len - off);
      scales[b] = quantize_piece<kMax>(x + base + off, m, base + off, mk, r, q);
      pack(q, base + off, m);
    }
  }
}

STRATA_QUANT_INLINE void quantize_int8(const float* x, std::size_t n, std::size_t block,
                                       const Rounding& r, float* scales, std::int8_t* codes) {
  quantize<127>(x, n, block, r, scales,
                [codes](const std::int32_t* q, std::size_t first, std::size_t m) STRATA_QUANT_LAMBDA {
                  std::int8_t* c = codes + first;
                  for (std::size_t j = 0; j < m; ++j) c[j] = static_cast<std::int8_t>(q[j]);
                });
}

// Blocks are even (and so are stage pieces), so every piece starts on a byte; only the
// stream's last piece can end on a half byte.
STRATA_QUANT_INLINE void quantize_int4(const float* x, std::size_t n, std::size_t block,
                                       const Rounding& r, float* scales, std::uint8_t* codes) {
  quantize<7>(x, n, block, r, scales,
              [codes](const std::int32_t* q, std::size_t first, std::size_t m) STRATA_QUANT_LAMBDA {
                std::uint8_t* c = codes + first / 2;
                const std::size_t pairs = m / 2;
                for (std::size_t j = 0; j < pairs; ++j) {
                  c[j] = static_cast<std::uint8_t>((q[2 * j] & 0xf) | ((q[2 * j + 1] & 0xf) << 4));
                }
                if (m & 1) c[pairs] = static_cast<std::uint8_t>(q[m - 1] & 0xf);
              });
}

template <bool kAdd>
STRATA_QUANT_INLINE void put(float* o, float v) {
  if constexpr (kAdd) {
    *o += v;
  } else {
    *o = v;
  }
}

template <bool kAdd>
STRATA_QUANT_INLINE void dequantize_int8(const float* scales, const std::int8_t* codes,
                                         std::size_t n, std::size_t block, float* out) {
  std::size_t b = 0;
  for (std::size_t base = 0; base < n; base += block, ++b) {
    const std::size_t len = std::min(block, n - base);
    const float s = scales[b];
    for (std::size_t j = 0; j < len; ++j) {
      put<kAdd>(out + base + j, static_cast<float>(codes[base + j]) * s);
    }
  }
}

// Shifting a nibble to the top of a byte and back sign-extends it.
STRATA_QUANT_INLINE std::int32_t low_nibble(std::uint8_t b) {
  return static_cast<std::int8_t>(static_cast<std::uint8_t>(b << 4)) >> 4;
}
STRATA_QUANT_INLINE std::int32_t high_nibble(std::uint8_t b) {
  return static_cast<std::int8_t>(b) >> 4;
}

template <bool kAdd>
STRATA_QUANT_INLINE void dequantize_int4(const float* scales, const std::uint8_t* codes,
                                         std::size_t n, std::size_t block, float* out) {
  std::size_t b = 0;
  for (std::size_t base = 0; base < n; base += block, ++b) {
    const std::size_t len = std::min(block, n - base);
    const float s = scales[b];
    const std::uint8_t* c = codes + base / 2;
    float* o = out + base;
    const std::size_t pairs = len / 2;
    for (std::size_t j = 0; j < pairs; ++j) {
      put<kAdd>(o + 2 * j, static_cast<float>(low_nibble(c[j])) * s);
      put<kAdd>(o + 2 * j + 1, static_cast<float>(high_nibble(c[j])) * s);
    }
    if (len & 1) put<kAdd>(o + len - 1, static_cast<float>(low_nibble(c[pairs])) * s);
  }
}

STRATA_QUANT_INLINE void to_fp16(const float* x, std::size_t n, std::uint16_t* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = core::float_to_f16(x[i]);
}
STRATA_QUANT_INLINE void to_bf16(const float* x, std::size_t n, std::uint16_t* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = core::float_to_bf16(x[i]);
}
STRATA_QUANT_INLINE void from_fp16(const std::uint16_t* h, std::size_t n, float* out, bool add) {
  if (add) {
    for (std::size_t i = 0; i < n; ++i) out[i] += core::f16_to_float(h[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = core::f16_to_float(h[i]);
  }
}
STRATA_QUANT_INLINE void from_bf16(const std::uint16_t* h, std::size_t n, float* out, bool add) {
  if (add) {
    for (std::size_t i = 0; i < n; ++i) out[i] += core::bf16_to_float(h[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = core::bf16_to_float(h[i]);
  }
}

// Keys are below 2^31, so signed compares (which vectorize everywhere) order them; 32-bit
// lane counters are flushed before they could wrap.
template <int kNt>
STRATA_QUANT_INLINE void count_at_least(const float* x, std::size_t n, const std::uint32_t* t,
                                        std::uint64_t* counts) {
  std::int32_t th[4] = {0, 0, 0, 0};
  for (int j = 0; j < kNt; ++j) th[j] = static_cast<std::int32_t>(t[j] - 1);  // key > t-1
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  for (std::size_t base = 0; base < n; base += kChunk) {
    const std::size_t m = std::min(kChunk, n - base);
    const float* p = x + base;
    std::uint32_t c[4] = {0, 0, 0, 0};
    for (std::size_t i = 0; i < m; ++i) {
      const auto key = static_cast<std::int32_t>(bits(p[i]) & 0x7fffffffu);
      if constexpr (kNt > 0) c[0] += key > th[0];
      if constexpr (kNt > 1) c[1] += key > th[1];
      if constexpr (kNt > 2) c[2] += key > th[2];
      if constexpr (kNt > 3) c[3] += key > th[3];
    }
    for (int j = 0; j < kNt; ++j) counts[j] += c[j];
  }
}

STRATA_QUANT_INLINE void count_at_least(const float* x, std::size_t n, const std::uint32_t* t,
                                        int nt, std::uint64_t* counts) {
  for (int j = 0; j < nt; ++j) counts[j] = 0;
  switch (nt) {
    case 1: count_at_least<1>(x, n, t, counts); break;
    case 2: count_at_least<2>(x, n, t, counts); break;
    case 3: count_at_least<3>(x, n, t, counts); break;
    default: count_at_least<4>(x, n, t, counts); break;
  }
}

STRATA_QUANT_INLINE std::size_t extract_at_least(const float* x, std::size_t n, std::uint32_t t,
                                                 std::uint32_t base, std::uint32_t* out) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if ((bits(x[i]) & 0x7fffffffu) >= t) out[c++] = base + static_cast<std::uint32_t>(i);
  }
  return c;
}

#undef STRATA_QUANT_INLINE
#undef STRATA_QUANT_LAMBDA

}  // namespace strata::kernels::body
