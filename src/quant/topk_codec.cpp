// Top-k codecs: about density * n elements, their values in any value coding, and their
// indices as delta varints or a bitmap, whichever is smaller.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "quant/codec_impl.hpp"
#include "quant/index_coding.hpp"
#include "quant/topk_select.hpp"
#include "quant/value_coding.hpp"
#include "quant/wire.hpp"
#include "strata/errors.hpp"

namespace strata::quant::detail {
namespace {

struct Scratch {
  std::vector<std::uint32_t> idx;
  std::vector<float> values;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

class TopkCodec final : public Codec {
 public:
  explicit TopkCodec(const CodecSpec& spec) : Codec(spec) {}

  std::size_t expected_wire_bytes(std::size_t n) const override {
    const std::size_t k = topk_count(spec().density, n);
    return kWireHeaderBytes + wire::value_bytes(spec().values, k, spec().block) +
           expected_index_bytes(n, k);
  }
  std::size_t max_wire_bytes(std::size_t n) const override {
    const std::size_t k = topk_count(spec().density, n);
    return kWireHeaderBytes + wire::value_bytes(spec().values, k, spec().block) +
           max_index_bytes(n, k);
  }

  std::size_t encode(std::span<const float> in, std::span<std::byte> out,
                     std::uint64_t seed) const override {
    const std::size_t n = in.size();
    if (n > std::numeric_limits<std::uint32_t>::max()) {
      throw InvalidArgument("quant: top-k encodes at most 2^32 - 1 elements, got " +
                            std::to_string(n));
    }
    return encode_aligned(out, max_wire_bytes(n), [&](std::byte* p) {
      Scratch& s = scratch();
      const std::size_t k = topk_count(spec().density, n);
      if (spec().select == TopkSelect::exact) {
        select_topk_exact(in, k, s.idx);
      } else {
        select_topk_sampled(in, k, s.idx);
      }
      const std::size_t kept = s.idx.size();
      s.values.resize(kept);
      for (std::size_t j = 0; j < kept; ++j) s.values[j] = in[s.idx[j]];

      wire::write_header(p, spec(), n, kept);
      std::byte* v = p + kWireHeaderBytes;
      encode_values(spec().values, s.values.data(), kept, spec().block,
                    kernels::make_rounding(spec().stochastic, seed), v);
      std::byte* i = v + wire::value_bytes(spec().values, kept, spec().block);
      const IndexPlan plan = plan_indices(s.idx, n);
      write_indices(plan, s.idx, n, i);
      return static_cast<std::size_t>(i - p) + plan.bytes;
    });
  }
};

}  // namespace

std::unique_ptr<Codec> make_topk_codec(const CodecSpec& spec) {
  return std::make_unique<TopkCodec>(spec);
}

void decode_topk_entries(const WireHeader& h, std::span<const std::byte> wire, std::vector<std::uint32_t>& idx,
                         std::vector<float>& values) {
  const auto k = static_cast<std::size_t>(h.k);
  const std::size_t vbytes = wire::value_bytes(h.values, k, h.block);
  read_indices(wire.subspan(kWireHeaderBytes + vbytes), h.n, h.k, idx);
  values.resize(k);
  decode_values(h.values, wire.data() + kWireHeaderBytes, k, h.block, values.data(), false);
}

void decode_topk(const WireHeader& h, std::span<const std::byte> wire, float* out, bool add) {
  Scratch& s = scratch();
  const auto k = static_cast<std::size_t>(h.k);
  const std::size_t vbytes = wire::value_bytes(h.values, k, h.block);
  const std::size_t index_at = kWireHeaderBytes + vbytes;
  read_indices(wire.subspan(index_at), h.n, h.k, s.idx);  // validates before any write
  s.values.resize(k);
  decode_values(h.values, wire.data() + kWireHeaderBytes, k, h.block, s.values.data(), false);
  if (add) {
    for (std::size_t j = 0; j < k; ++j) out[s.idx[j]] += s.values[j];
  } else {
    std::fill(out, out + h.n, 0.0f);
    for (std::size_t j = 0; j < k; ++j) out[s.idx[j]] = s.values[j];
  }
}

}  // namespace strata::quant::detail
