// Byte-level layout shared by the codecs (internal).
//
// Header, little-endian:
//   [0] magic 0x51 ('Q')  [1] version  [2] Sparsity  [3] ValueCoding
//   [4..7] block (u32)    [8..15] n (u64)            [16..23] k (u64)
// Dense payload: the value section for n elements. Top-k payload: the value section for
// k elements, then one IndexCoding byte and the index bytes (to the end of the buffer).
// Value sections: f32 4 B, fp16/bf16 2 B per element; int8/int4: one f32 scale per block,
// then the codes (int8 one byte each; int4 two per byte, the earlier element in the low
// nibble).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "quant/codec.hpp"

namespace strata::quant::wire {

// The formats are defined little-endian and written with memcpy; a big-endian port needs
// byte swaps in load/store and the bulk copies.
static_assert(std::endian::native == std::endian::little);

inline constexpr std::uint8_t kMagic = 0x51;
inline constexpr std::uint8_t kVersion = 1;

template <class T>
inline void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <class T>
inline T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Throws InvalidArgument("quant: corrupt buffer: " + what).
[[noreturn]] void corrupt(const std::string& what);

inline bool is_block_coding(ValueCoding v) {
  return v == ValueCoding::int8 || v == ValueCoding::int4;
}

inline std::size_t block_count(std::size_t count, std::size_t block) {
  return count == 0 ? 0 : (count - 1) / block + 1;
}

// Bytes of a value section holding count elements (block ignored for cast codings).
inline std::size_t value_bytes(ValueCoding v, std::size_t count, std::size_t block) {
  switch (v) {
    case ValueCoding::f32: return 4 * count;
    case ValueCoding::fp16:
    case ValueCoding::bf16: return 2 * count;
    case ValueCoding::int8: return 4 * block_count(count, block) + count;
    case ValueCoding::int4: return 4 * block_count(count, block) + (count + 1) / 2;
  }
  return 0;
}

inline void write_header(std::byte* p, const CodecSpec& s, std::uint64_t n, std::uint64_t k) {
  p[0] = std::byte{kMagic};
  p[1] = std::byte{kVersion};
  p[2] = static_cast<std::byte>(s.sparsity);
  p[3] = static_cast<std::byte>(s.values);
  store<std::uint32_t>(p + 4, is_block_coding(s.values) ? s.block : 0);
  store<std::uint64_t>(p + 8, n);
  store<std::uint64_t>(p + 16, k);
}

}  // namespace strata::quant::wire
