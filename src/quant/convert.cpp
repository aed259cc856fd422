#include "quant/convert.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/quant.hpp"
#include "strata/errors.hpp"

namespace strata::quant {
namespace {

[[noreturn]] void unsupported(DataType dt) {
  throw InvalidArgument(std::string("quant: codecs take f32, f16 or bf16 data, not ") +
                        to_string(dt));
}

}  // namespace

void widen_to_f32(DataType dt, const void* src, std::size_t n, std::span<float> dst) {
  if (dst.size() != n) {
    throw InvalidArgument("quant: widen_to_f32 of " + std::to_string(n) + " elements into " +
                          std::to_string(dst.size()));
  }
  switch (dt) {
    case DataType::f32: std::memcpy(dst.data(), src, 4 * n); return;
    case DataType::f16:
      kernels::from_fp16(static_cast<const std::uint16_t*>(src), n, dst.data(), false);
      return;
    case DataType::bf16:
      kernels::from_bf16(static_cast<const std::uint16_t*>(src), n, dst.data(), false);
      return;
    default: unsupported(dt);
  }
}

void narrow_from_f32(DataType dt, std::span<const float> src, void* dst) {
  switch (dt) {
    case DataType::f32: std::memcpy(dst, src.data(), 4 * src.size()); return;
    case DataType::f16:
      kernels::to_fp16(src.data(), src.size(), static_cast<std::uint16_t*>(dst));
      return;
    case DataType::bf16:
      kernels::to_bf16(src.data(), src.size(), static_cast<std::uint16_t*>(dst));
      return;
    default: unsupported(dt);
  }
}

}  // namespace strata::quant
