// CRC32C (Castagnoli), the checksum of every WAN frame. Uses the SSE4.2 crc32
// instruction when the CPU has it (checked once at run time) and a table otherwise, so
// the same binary runs on any x86-64 and the result never depends on which path ran.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::link {

// Extends a finished CRC over more bytes: crc32c_extend(crc32c_extend(0, a), b) equals
// the CRC of a followed by b, which lets a receiver checksum a payload as it streams in.
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n);
inline std::uint32_t crc32c(const void* data, std::size_t n) { return crc32c_extend(0, data, n); }

// The portable path alone, so tests can check both paths agree.
std::uint32_t crc32c_extend_portable(std::uint32_t crc, const void* data, std::size_t n);
bool crc32c_hardware();

}  // namespace strata::link
