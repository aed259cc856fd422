#include "link/crc32c.hpp"

#include <array>
#include <cstring>

#include "base/cpu_features.hpp"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace strata::link {

namespace {

constexpr std::uint32_t kPoly = 0x82F63B78;  // reflected Castagnoli polynomial

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kTable = make_table();

std::uint32_t portable_raw(std::uint32_t c, const unsigned char* p, std::size_t n) {
  while (n--) c = kTable[(c ^ *p++) & 0xFF] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t hardware_raw(std::uint32_t c,
                                                              const unsigned char* p,
                                                              std::size_t n) {
  std::uint64_t c64 = c;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);  // unaligned-safe
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  c = static_cast<std::uint32_t>(c64);
  while (n--) c = _mm_crc32_u8(c, *p++);
  return c;
}
#endif

bool detect() {
#if defined(__x86_64__)
  return cpu::features().sse42;
#else
  return false;
#endif
}

}  // namespace

bool crc32c_hardware() {
  static const bool has = detect();
  return has;
}

std::uint32_t crc32c_extend_portable(std::uint32_t crc, const void* data, std::size_t n) {
  return ~portable_raw(~crc, static_cast<const unsigned char*>(data), n);
}

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n) {
#if defined(__x86_64__)
  if (crc32c_hardware()) return ~hardware_raw(~crc, static_cast<const unsigned char*>(data), n);
#endif
  return crc32c_extend_portable(crc, data, n);
}

}  // namespace strata::link
