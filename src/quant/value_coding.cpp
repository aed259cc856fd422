#include "quant/value_coding.hpp"

#include <cstring>

#include "quant/wire.hpp"

namespace strata::quant {

void encode_values(ValueCoding v, const float* x, std::size_t count, std::uint32_t block,
                   const kernels::Rounding& r, std::byte* out) {
  if (count == 0) return;
  const std::size_t scale_bytes = wire::is_block_coding(v) ? 4 * wire::block_count(count, block) : 0;
  switch (v) {
    case ValueCoding::f32: std::memcpy(out, x, 4 * count); return;
    case ValueCoding::fp16: kernels::to_fp16(x, count, reinterpret_cast<std::uint16_t*>(out)); return;
    case ValueCoding::bf16: kernels::to_bf16(x, count, reinterpret_cast<std::uint16_t*>(out)); return;
    case ValueCoding::int8:
      kernels::quantize_int8(x, count, block, r, reinterpret_cast<float*>(out),
                             reinterpret_cast<std::int8_t*>(out + scale_bytes));
      return;
    case ValueCoding::int4:
      kernels::quantize_int4(x, count, block, r, reinterpret_cast<float*>(out),
                             reinterpret_cast<std::uint8_t*>(out + scale_bytes));
      return;
  }
}

void decode_values(ValueCoding v, const std::byte* in, std::size_t count, std::uint32_t block,
                   float* out, bool add) {
  if (count == 0) return;
  const std::size_t scale_bytes = wire::is_block_coding(v) ? 4 * wire::block_count(count, block) : 0;
  const auto* scales = reinterpret_cast<const float*>(in);
  switch (v) {
    case ValueCoding::f32:
      if (!add) {
        std::memcpy(out, in, 4 * count);
      } else {
        const auto* f = reinterpret_cast<const float*>(in);
        for (std::size_t i = 0; i < count; ++i) out[i] += f[i];
      }
      return;
    case ValueCoding::fp16:
      kernels::from_fp16(reinterpret_cast<const std::uint16_t*>(in), count, out, add);
      return;
    case ValueCoding::bf16:
      kernels::from_bf16(reinterpret_cast<const std::uint16_t*>(in), count, out, add);
      return;
    case ValueCoding::int8:
      kernels::dequantize_int8(scales, reinterpret_cast<const std::int8_t*>(in + scale_bytes),
                               count, block, out, add);
      return;
    case ValueCoding::int4:
      kernels::dequantize_int4(scales, reinterpret_cast<const std::uint8_t*>(in + scale_bytes),
                               count, block, out, add);
      return;
  }
}

}  // namespace strata::quant
