// Header validation, decode dispatch and the Codec base class.
#include "quant/codec.hpp"

#include <limits>
#include <string>

#include "quant/codec_impl.hpp"
#include "quant/wire.hpp"
#include "strata/errors.hpp"

namespace strata::quant {

namespace wire {
void corrupt(const std::string& what) { throw InvalidArgument("quant: corrupt buffer: " + what); }
}  // namespace wire

namespace detail {

void check_output(std::size_t have, std::size_t need) {
  if (have < need) {
    throw InvalidArgument("quant: encode needs an output of " + std::to_string(need) +
                          " bytes, got " + std::to_string(have));
  }
}

std::byte* aligned_scratch(std::size_t bytes) {
  thread_local std::vector<std::uint64_t> buf;
  buf.resize((bytes + 7) / 8);
  return reinterpret_cast<std::byte*>(buf.data());
}

}  // namespace detail

namespace {

std::string str(std::uint64_t v) { return std::to_string(v); }

template <class F>
void with_aligned(std::span<const std::byte> wire, F&& f) {
  if (reinterpret_cast<std::uintptr_t>(wire.data()) % 8 == 0) return f(wire);
  std::byte* copy = detail::aligned_scratch(wire.size());
  std::copy(wire.begin(), wire.end(), copy);
  f(std::span<const std::byte>(copy, wire.size()));
}

void decode_impl(std::span<const std::byte> wire, std::span<float> out, bool add,
                 const CodecSpec* expect) {
  with_aligned(wire, [&](std::span<const std::byte> w) {
    const WireHeader h = read_header(w);
    if (expect != nullptr &&
        (h.sparsity != expect->sparsity || h.values != expect->values ||
         (wire::is_block_coding(h.values) && h.block != expect->block))) {
      throw InvalidArgument("quant: a buffer encoded as " +
                            std::string(h.sparsity == Sparsity::topk ? "topk+" : "dense ") +
                            to_string(h.values) + " cannot be decoded by codec '" +
                            to_string(*expect) + "'");
    }
    if (h.n != out.size()) {
      throw InvalidArgument("quant: decode: the buffer holds " + str(h.n) +
                            " elements but the output has " + str(out.size()));
    }
    if (h.sparsity == Sparsity::dense) {
      detail::decode_dense(h, w, out.data(), add);
    } else {
      detail::decode_topk(h, w, out.data(), add);
    }
  });
}

}  // namespace

WireHeader read_header(std::span<const std::byte> w) {
  if (w.size() < kWireHeaderBytes) {
    wire::corrupt("it has " + str(w.size()) + " bytes, fewer than the " + str(kWireHeaderBytes) +
                  "-byte header");
  }
  const auto u8 = [&](std::size_t i) { return static_cast<std::uint8_t>(w[i]); };
  if (u8(0) != wire::kMagic) wire::corrupt("bad magic byte " + str(u8(0)));
  if (u8(1) != wire::kVersion) {
    wire::corrupt("format version " + str(u8(1)) + ", this build reads version " +
                  str(wire::kVersion));
  }
  if (u8(2) > static_cast<std::uint8_t>(Sparsity::topk)) wire::corrupt("unknown sparsity " + str(u8(2)));
  if (u8(3) > static_cast<std::uint8_t>(ValueCoding::int4)) {
    wire::corrupt("unknown value coding " + str(u8(3)));
  }
  WireHeader h{static_cast<Sparsity>(u8(2)), static_cast<ValueCoding>(u8(3)),
               wire::load<std::uint32_t>(w.data() + 4), wire::load<std::uint64_t>(w.data() + 8),
               wire::load<std::uint64_t>(w.data() + 16)};
  if (wire::is_block_coding(h.values)) {
    if (h.block < 1 || h.block > kMaxBlock || (h.values == ValueCoding::int4 && h.block % 2 != 0)) {
      wire::corrupt("bad block size " + str(h.block) + " for " + to_string(h.values));
    }
  } else if (h.block != 0) {
    wire::corrupt("block size " + str(h.block) + " given for " + to_string(h.values));
  }
  // Every element costs at least half a byte, which bounds k (and dense n) by the length
  // before any size arithmetic could overflow.
  const std::size_t payload = w.size() - kWireHeaderBytes;
  if (h.k > 2 * static_cast<std::uint64_t>(payload) + 1) {
    wire::corrupt(str(h.k) + " elements cannot fit in " + str(payload) + " payload bytes");
  }
  const std::size_t vbytes = wire::value_bytes(h.values, static_cast<std::size_t>(h.k), h.block);
  if (h.sparsity == Sparsity::dense) {
    if (h.k != h.n) wire::corrupt("a dense buffer with n " + str(h.n) + " != k " + str(h.k));
    if (payload != vbytes) {
      wire::corrupt("a dense " + std::string(to_string(h.values)) + " payload of " + str(payload) +
                    " bytes, expected " + str(vbytes) + " for " + str(h.n) + " elements");
    }
  } else {
    if (h.n > std::numeric_limits<std::uint32_t>::max()) {
      wire::corrupt("a top-k buffer over " + str(h.n) + " elements (at most 2^32 - 1)");
    }
    if (h.k > h.n) wire::corrupt("a top-k buffer keeping " + str(h.k) + " of " + str(h.n) + " elements");
    if (payload < vbytes + 1) {
      wire::corrupt("a top-k payload of " + str(payload) + " bytes, too short for " + str(h.k) +
                    " " + to_string(h.values) + " values and the index section");
    }
  }
  return h;
}

void decode(std::span<const std::byte> wire, std::span<float> out) {
  decode_impl(wire, out, false, nullptr);
}
void decode_add(std::span<const std::byte> wire, std::span<float> accum) {
  decode_impl(wire, accum, true, nullptr);
}

bool decode_sparse(std::span<const std::byte> wire, std::vector<std::uint32_t>& idx,
                   std::vector<float>& values) {
  bool sparse = false;
  with_aligned(wire, [&](std::span<const std::byte> w) {
    const WireHeader h = read_header(w);
    if (h.sparsity != Sparsity::topk) return;
    detail::decode_topk_entries(h, w, idx, values);
    sparse = true;
  });
  return sparse;
}

bool Codec::lossy() const {
  return spec_.sparsity == Sparsity::topk || spec_.values != ValueCoding::f32;
}

void Codec::encode(std::span<const float> in, std::vector<std::byte>& out,
                   std::uint64_t seed) const {
  out.resize(max_wire_bytes(in.size()));
  out.resize(encode(in, std::span<std::byte>(out), seed));
}

void Codec::decode(std::span<const std::byte> wire, std::span<float> out) const {
  decode_impl(wire, out, false, &spec_);
}
void Codec::decode_add(std::span<const std::byte> wire, std::span<float> accum) const {
  decode_impl(wire, accum, true, &spec_);
}

std::unique_ptr<Codec> make_codec(const CodecSpec& spec) {
  validate(spec);
  return spec.sparsity == Sparsity::topk ? detail::make_topk_codec(spec)
                                         : detail::make_dense_codec(spec);
}

}  // namespace strata::quant
