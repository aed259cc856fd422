// Dense codecs: every element is sent, raw (none), cast (fp16, bf16) or block-quantized
// (int8, int4). Their size depends on n alone.
#include "quant/codec_impl.hpp"
#include "quant/value_coding.hpp"
#include "quant/wire.hpp"

namespace strata::quant::detail {
namespace {

class DenseCodec final : public Codec {
 public:
  explicit DenseCodec(const CodecSpec& spec) : Codec(spec) {}

  std::size_t expected_wire_bytes(std::size_t n) const override {
    return kWireHeaderBytes + wire::value_bytes(spec().values, n, spec().block);
  }
  std::size_t max_wire_bytes(std::size_t n) const override { return expected_wire_bytes(n); }

  std::size_t encode(std::span<const float> in, std::span<std::byte> out,
                     std::uint64_t seed) const override {
    const std::size_t len = expected_wire_bytes(in.size());
    return encode_aligned(out, len, [&](std::byte* p) {
      wire::write_header(p, spec(), in.size(), in.size());
      encode_values(spec().values, in.data(), in.size(), spec().block,
                    kernels::make_rounding(spec().stochastic, seed), p + kWireHeaderBytes);
      return len;
    });
  }
};

}  // namespace

std::unique_ptr<Codec> make_dense_codec(const CodecSpec& spec) {
  return std::make_unique<DenseCodec>(spec);
}

void decode_dense(const WireHeader& h, std::span<const std::byte> wire, float* out, bool add) {
  decode_values(h.values, wire.data() + kWireHeaderBytes, static_cast<std::size_t>(h.n), h.block,
                out, add);
}

}  // namespace strata::quant::detail
