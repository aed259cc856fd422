#include "quant/index_coding.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "quant/wire.hpp"

namespace strata::quant {
namespace {

constexpr std::size_t kMaxVarint = 5;  // 32-bit values

inline std::size_t varint_len(std::uint32_t v) {
  // One byte per started 7-bit group; v | 1 keeps zero at one group.
  return static_cast<std::size_t>(38 - std::countl_zero(v | 1u)) / 7;
}

inline std::size_t bitmap_bytes(std::uint64_t n) { return static_cast<std::size_t>((n + 7) / 8); }

}  // namespace

IndexPlan plan_indices(std::span<const std::uint32_t> idx, std::uint64_t n) {
  const std::size_t bitmap = bitmap_bytes(n);
  std::size_t varint = 0;
  std::uint32_t next = 0;  // smallest index the next one may take
  for (const std::uint32_t i : idx) {
    varint += varint_len(i - next);
    next = i + 1;
    if (varint >= bitmap) break;  // already lost
  }
  if (varint < bitmap) return IndexPlan{IndexCoding::delta_varint, 1 + varint};
  return IndexPlan{IndexCoding::bitmap, 1 + bitmap};
}

void write_indices(const IndexPlan& plan, std::span<const std::uint32_t> idx, std::uint64_t n,
                   std::byte* out) {
  out[0] = static_cast<std::byte>(plan.coding);
  std::byte* p = out + 1;
  if (plan.coding == IndexCoding::bitmap) {
    std::memset(p, 0, bitmap_bytes(n));
    for (const std::uint32_t i : idx) p[i / 8] |= static_cast<std::byte>(1u << (i % 8));
    return;
  }
  std::uint32_t next = 0;
  for (const std::uint32_t i : idx) {
    std::uint32_t g = i - next;
    next = i + 1;
    while (g >= 0x80) {
      *p++ = static_cast<std::byte>((g & 0x7f) | 0x80);
      g >>= 7;
    }
    *p++ = static_cast<std::byte>(g);
  }
}

void read_indices(std::span<const std::byte> section, std::uint64_t n, std::uint64_t k,
                  std::vector<std::uint32_t>& out) {
  if (section.empty()) wire::corrupt("the top-k index section is missing");
  const auto coding = static_cast<std::uint8_t>(section[0]);
  const std::span<const std::byte> body = section.subspan(1);
  out.clear();
  if (coding == static_cast<std::uint8_t>(IndexCoding::bitmap)) {
    if (body.size() != bitmap_bytes(n)) {
      wire::corrupt("the index bitmap has " + std::to_string(body.size()) + " bytes, expected " +
                    std::to_string(bitmap_bytes(n)) + " for " + std::to_string(n) + " elements");
    }
    if (n % 8 != 0 && (static_cast<std::uint8_t>(body.back()) >> (n % 8)) != 0) {
      wire::corrupt("the index bitmap has bits set past element " + std::to_string(n));
    }
    std::size_t set = 0;
    for (const std::byte b : body) set += static_cast<std::size_t>(std::popcount(static_cast<std::uint8_t>(b)));
    if (set != k) {
      wire::corrupt("the index bitmap marks " + std::to_string(set) + " elements, the header " +
                    std::to_string(k));
    }
    out.reserve(k);
    for (std::size_t byte = 0; byte < body.size(); ++byte) {
      auto bits = static_cast<std::uint32_t>(body[byte]);
      while (bits != 0) {
        out.push_back(static_cast<std::uint32_t>(byte * 8) +
                      static_cast<std::uint32_t>(std::countr_zero(bits)));
        bits &= bits - 1;
      }
    }
    return;
  }
  if (coding != static_cast<std::uint8_t>(IndexCoding::delta_varint)) {
    wire::corrupt("unknown index coding " + std::to_string(coding));
  }
  // Each index takes at least one byte, so this also bounds the reservation by the input.
  if (k > body.size()) {
    wire::corrupt("the varint index section has " + std::to_string(body.size()) +
                  " bytes, too few for " + std::to_string(k) + " indices");
  }
  out.reserve(k);
  std::size_t pos = 0;
  std::uint64_t next = 0;
  for (std::uint64_t j = 0; j < k; ++j) {
    std::uint64_t g = 0;
    std::size_t len = 0;
    while (true) {
      if (pos >= body.size()) wire::corrupt("the varint index section ends inside index " + std::to_string(j));
      const auto b = static_cast<std::uint8_t>(body[pos++]);
      g |= static_cast<std::uint64_t>(b & 0x7f) << (7 * len);
      ++len;
      if ((b & 0x80) == 0) {
        if (len > 1 && b == 0) wire::corrupt("a non-canonical varint at index " + std::to_string(j));
        break;
      }
      if (len == kMaxVarint) wire::corrupt("a varint longer than 5 bytes at index " + std::to_string(j));
    }
    const std::uint64_t i = next + g;
    if (i >= n) {
      wire::corrupt("index " + std::to_string(i) + " is past the " + std::to_string(n) +
                    " elements");
    }
    out.push_back(static_cast<std::uint32_t>(i));
    next = i + 1;
  }
  if (pos != body.size()) {
    wire::corrupt(std::to_string(body.size() - pos) + " stray bytes after the last index");
  }
}

std::size_t max_index_bytes(std::uint64_t n, std::uint64_t k) {
  return 1 + static_cast<std::size_t>(std::min<std::uint64_t>(bitmap_bytes(n), kMaxVarint * k));
}

std::size_t expected_index_bytes(std::uint64_t n, std::uint64_t k) {
  if (k == 0 || n == 0) return 1;
  // Randomly placed indices have geometric gaps with p = k / n; a gap takes one byte plus
  // one for each 7-bit boundary it reaches, and P(gap >= m) = (1 - p)^m.
  const double p = static_cast<double>(std::min(k, n)) / static_cast<double>(n);
  double per_index = 1;
  if (p < 1) {
    for (int b = 7; b < 35; b += 7) per_index += std::exp(std::ldexp(1.0, b) * std::log1p(-p));
  }
  const double varint = per_index * static_cast<double>(k);
  return 1 + static_cast<std::size_t>(std::min(static_cast<double>(bitmap_bytes(n)), std::ceil(varint)));
}

}  // namespace strata::quant
