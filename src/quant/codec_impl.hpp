// Hooks between codec.cpp and the codec families (internal).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "quant/codec.hpp"

namespace strata::quant::detail {

std::unique_ptr<Codec> make_dense_codec(const CodecSpec& spec);
std::unique_ptr<Codec> make_topk_codec(const CodecSpec& spec);

// wire has passed read_header (which returned h) and is 8-byte aligned; out holds h.n.
void decode_dense(const WireHeader& h, std::span<const std::byte> wire, float* out, bool add);
void decode_topk(const WireHeader& h, std::span<const std::byte> wire, float* out, bool add);
void decode_topk_entries(const WireHeader& h, std::span<const std::byte> wire, std::vector<std::uint32_t>& idx,
                         std::vector<float>& values);

// Runs encode_into(aligned_out) on out itself when it is 8-byte aligned and on scratch
// otherwise; checks out holds max_bytes first.
template <class F>
std::size_t encode_aligned(std::span<std::byte> out, std::size_t max_bytes, F&& encode_into);
void check_output(std::size_t have, std::size_t need);
std::byte* aligned_scratch(std::size_t bytes);

template <class F>
std::size_t encode_aligned(std::span<std::byte> out, std::size_t max_bytes, F&& encode_into) {
  check_output(out.size(), max_bytes);
  if (reinterpret_cast<std::uintptr_t>(out.data()) % 8 == 0) return encode_into(out.data());
  std::byte* tmp = aligned_scratch(max_bytes);
  const std::size_t len = encode_into(tmp);
  std::copy(tmp, tmp + len, out.data());
  return len;
}

}  // namespace strata::quant::detail
