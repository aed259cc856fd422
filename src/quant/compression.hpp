// From the public Compression option to the codec layer.
#pragma once

#include <cstdint>

#include "quant/codec.hpp"
#include "strata/compression.hpp"

namespace strata::quant {

// Throws InvalidArgument when the option does not describe a valid codec.
CodecSpec codec_spec(const Compression& c);
// Nonzero for lossy options; equal on two ranks exactly when they compress alike.
std::uint32_t compression_hash(const Compression& c);

}  // namespace strata::quant
