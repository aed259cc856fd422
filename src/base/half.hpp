// IEEE binary16 ("half") and bfloat16 conversions to and from float.
//
// Both directions round to nearest, ties to even, and handle infinities, NaNs and
// subnormals. Each function is a handful of integer operations ending in selects rather
// than branches, so loops calling them auto-vectorize on plain SSE2. The results match
// the F16C instructions bit for bit, NaN payloads included: ranks whose CPUs differ must
// still agree on every bit, and the reduction kernels use F16C where it exists.
//
// The code is also immune to FTZ/DAZ: no subnormal float ever reaches an FP instruction
// except in float_to_f16's tiny-value path, where flushing it to zero is the right answer
// anyway (every float subnormal rounds to a zero half).
#pragma once

#include <bit>
#include <cstdint>

#include "base/cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define STRATA_HAVE_F16C_TARGET 1
#endif

namespace strata::core {

namespace detail {
// Select through a mask rather than ?:. GCC sinks a computation into the arm of a ?: that
// uses it, and under the default -ftrapping-math it will not if-convert an arm holding FP
// arithmetic (speculating it might raise flags), so the whole loop stays scalar. A bitwise
// blend has no arms.
[[gnu::always_inline]] inline std::uint32_t blend(bool c, std::uint32_t if_true,
                                                  std::uint32_t if_false) {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return (if_true & m) | (if_false & ~m);
}
}  // namespace detail

// Storage-only wrappers: arithmetic happens in float, so these carry bits and nothing else.
struct f16 {
  std::uint16_t bits;
};
struct bf16 {
  std::uint16_t bits;
};

[[gnu::always_inline]] inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::int32_t exp = (h >> 10) & 0x1f;
  const std::uint32_t mant = h & 0x3ffu;
  // Normal halves only need the exponent rebiased from 15 to 127.
  const std::uint32_t normal =
      ((static_cast<std::uint32_t>(exp) + (127 - 15)) << 23) | (mant << 13);
  // Subnormals (and zero) are mant * 2^-24; the int->float conversion and the power-of-two
  // scale are both exact, and this never touches a float subnormal, so DAZ cannot bite.
  const std::uint32_t subnormal =
      std::bit_cast<std::uint32_t>(static_cast<float>(static_cast<std::int32_t>(mant)) * 0x1p-24f);
  // vcvtph2ps quiets signalling NaNs; do the same so both paths agree.
  const std::uint32_t special =
      0x7f800000u | (mant << 13) | detail::blend(mant != 0, 0x00400000u, 0u);
  std::uint32_t r = detail::blend(exp == 0, subnormal, normal);
  r = detail::blend(exp == 0x1f, special, r);
  return std::bit_cast<float>(r | sign);
}

[[gnu::always_inline]] inline std::uint16_t float_to_f16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  // Signed compares on the magnitude vectorize directly on SSE2; unsigned ones do not.
  const std::int32_t a = static_cast<std::int32_t>(u & 0x7fffffffu);
  const float af = std::bit_cast<float>(a);

  // Results that are normal halves: rebias 127 -> 15, then round the 13 dropped bits to
  // nearest even by adding 0xfff plus the lowest kept bit. A carry out of the mantissa
  // bumps the exponent, which is exactly right, including the overflow to infinity.
  const std::uint32_t ua = static_cast<std::uint32_t>(a);
  const std::uint32_t normal = (ua - ((127u - 15u) << 23) + 0xfffu + ((ua >> 13) & 1u)) >> 13;

  // Results that are subnormal halves (|f| < 2^-14): adding 0.5 puts the half's mantissa
  // lsb at the float's lsb, so the FP adder performs the round-to-nearest-even for us;
  // subtracting 0.5's bits leaves the half encoding (0x400 when it rounds up to 2^-14).
  const std::uint32_t subnormal =
      std::bit_cast<std::uint32_t>(af + 0.5f) - std::bit_cast<std::uint32_t>(0.5f);

  // |f| >= 65536 is infinity; NaNs keep the top payload bits and are quieted (as vcvtps2ph).
  const std::uint32_t special =
      detail::blend(a > 0x7f800000, 0x7e00u | ((ua >> 13) & 0x3ffu), 0x7c00u);

  std::uint32_t r = detail::blend(a < 0x38800000, subnormal, normal);  // 0x38800000 is 2^-14
  r = detail::blend(a >= 0x47800000, special, r);                      // 0x47800000 is 2^16
  return static_cast<std::uint16_t>(r | sign);
}

[[gnu::always_inline]] inline float bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

[[gnu::always_inline]] inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  // Truncating a NaN whose payload lives only in the low 16 bits would produce infinity;
  // setting the quiet bit keeps it a NaN. (vcvtneps2bf16 treats NaNs the same way.)
  const std::uint32_t nan = (u >> 16) | 0x40u;
  const bool is_nan = static_cast<std::int32_t>(u & 0x7fffffffu) > 0x7f800000;
  return static_cast<std::uint16_t>(detail::blend(is_nan, nan, rounded));
}

inline float to_float(f16 h) { return f16_to_float(h.bits); }
inline float to_float(bf16 h) { return bf16_to_float(h.bits); }
inline f16 to_f16(float f) { return f16{float_to_f16(f)}; }
inline bf16 to_bf16(float f) { return bf16{float_to_bf16(f)}; }

// Hardware conversions, for callers that have checked cpu_has_f16c(). Exposed mainly so
// tests can prove the portable code above agrees with them.
inline bool cpu_has_f16c() {
#ifdef STRATA_HAVE_F16C_TARGET
  return cpu::features().f16c;
#else
  return false;
#endif
}

#ifdef STRATA_HAVE_F16C_TARGET
[[gnu::target("f16c")]] inline float f16_to_float_f16c(std::uint16_t h) { return _cvtsh_ss(h); }
[[gnu::target("f16c")]] inline std::uint16_t float_to_f16_f16c(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#endif

}  // namespace strata::core
