// Value sections (layout in wire.hpp), shared by the dense codecs and top-k's values.
//
// Pointers into wire buffers must be aligned as the buffer start plus the header keeps
// them: 8-byte aligned buffers give 4-byte aligned scales and 2-byte aligned halves. The
// codec entry points copy misaligned buffers before calling these.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/codec.hpp"
#include "kernels/quant.hpp"

namespace strata::quant {

// Writes wire::value_bytes(v, count, block) bytes.
void encode_values(ValueCoding v, const float* x, std::size_t count, std::uint32_t block,
                   const kernels::Rounding& r, std::byte* out);
// out[i] = value i (or out[i] += value i when add) for i < count.
void decode_values(ValueCoding v, const std::byte* in, std::size_t count, std::uint32_t block,
                   float* out, bool add);

}  // namespace strata::quant
