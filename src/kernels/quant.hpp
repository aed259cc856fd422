// The codecs' O(n) loops, in a portable variant and an AVX2 variant (isa.hpp picks).
//
// Both variants give identical bits (tests compare them), so ranks on different CPUs
// agree. Neither uses FMA: a fused multiply-add rounds once where the portable code rounds
// twice, and decoders must match across machines.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::kernels {

// |x| as an ordered integer: comparing keys compares magnitudes, NaNs rank above infinity,
// and both the total order and the integer compares stay cheap to vectorize.
inline std::uint32_t magnitude_key(std::uint32_t float_bits) { return float_bits & 0x7fffffffu; }

// Stochastic rounding draws u in [0, 1) from a hash of (seed, element position): any rank
// that knows the seed reproduces the draws, and no generator state runs through the loop.
struct Rounding {
  bool stochastic = false;
  std::uint32_t s0 = 0;
  std::uint32_t s1 = 0;
};
Rounding make_rounding(bool stochastic, std::uint64_t seed);

// Symmetric block quantization: scale = max|x| / qmax per block of `block` elements (qmax
// 127 for int8, 7 for int4), codes = round(x / scale) clamped to [-qmax, qmax]. A block of
// zeros gets scale 0; a block with a NaN or infinity gets a NaN scale and zero codes.
// int4 needs an even block (so blocks start on byte boundaries); two codes per byte, the
// lower-indexed in the low nibble.
void quantize_int8(const float* x, std::size_t n, std::size_t block, const Rounding& r,
                   float* scales, std::int8_t* codes);
void quantize_int4(const float* x, std::size_t n, std::size_t block, const Rounding& r,
                   float* scales, std::uint8_t* codes);
// out[i] = code * scale, or out[i] += code * scale when add.
void dequantize_int8(const float* scales, const std::int8_t* codes, std::size_t n,
                     std::size_t block, float* out, bool add);
void dequantize_int4(const float* scales, const std::uint8_t* codes, std::size_t n,
                     std::size_t block, float* out, bool add);

// Round to nearest even, as core/half.hpp.
void to_fp16(const float* x, std::size_t n, std::uint16_t* out);
void to_bf16(const float* x, std::size_t n, std::uint16_t* out);
void from_fp16(const std::uint16_t* h, std::size_t n, float* out, bool add);
void from_bf16(const std::uint16_t* h, std::size_t n, float* out, bool add);

// counts[j] = #{i : magnitude_key(x[i]) >= t[j]} for j < nt (1 <= nt <= 4), one pass.
// Thresholds must be at most 0x80000000.
void count_at_least(const float* x, std::size_t n, const std::uint32_t* t, int nt,
                    std::uint64_t* counts);
// Writes the ascending indices i < n with magnitude_key(x[i]) >= t, plus `base`, to out
// and returns how many. out must have room for all of them plus kExtractSlack (the AVX2
// variant stores eight at a time). n < 2^32.
inline constexpr std::size_t kExtractSlack = 8;
std::size_t extract_at_least(const float* x, std::size_t n, std::uint32_t t, std::uint32_t base,
                             std::uint32_t* out);

}  // namespace strata::kernels
