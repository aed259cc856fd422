// Codecs work in f32; half-precision tensors widen on the way in and narrow on the way out
// (rounding to nearest even, as the reduction kernels do).
#pragma once

#include <cstddef>
#include <span>

#include "strata/types.hpp"

namespace strata::quant {

// src holds n elements of dt (f32, f16 or bf16; others throw InvalidArgument).
void widen_to_f32(DataType dt, const void* src, std::size_t n, std::span<float> dst);
void narrow_from_f32(DataType dt, std::span<const float> src, void* dst);

}  // namespace strata::quant
