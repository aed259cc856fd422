// Top-k index sections: one IndexCoding byte, then either
//  * delta_varint: for each index, the gap to the previous one minus 1 (the first index
//    itself), as LEB128 (7 bits per byte, low group first, at most 5 bytes, canonical);
//  * bitmap: ceil(n / 8) bytes, bit i % 8 of byte i / 8 set for each kept index i.
// The writer picks whichever is smaller (the bitmap on a tie): varint wins while the
// average gap needs fewer than 8 bits per index, i.e. below about 1/8 density.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "quant/codec.hpp"

namespace strata::quant {

struct IndexPlan {
  IndexCoding coding;
  std::size_t bytes;  // whole section, flag byte included
};

// idx must be strictly ascending and below n.
IndexPlan plan_indices(std::span<const std::uint32_t> idx, std::uint64_t n);
// Writes the planned section to out (plan.bytes bytes).
void write_indices(const IndexPlan& plan, std::span<const std::uint32_t> idx, std::uint64_t n,
                   std::byte* out);
// Decodes a whole section, which must hold exactly k ascending indices below n and end
// where the buffer ends; throws InvalidArgument (corrupt buffer) otherwise.
void read_indices(std::span<const std::byte> section, std::uint64_t n, std::uint64_t k,
                  std::vector<std::uint32_t>& out);

// Section sizes for k indices out of n: the largest possible, and the expected size for
// randomly placed indices (what top-k of a noisy gradient looks like).
std::size_t max_index_bytes(std::uint64_t n, std::uint64_t k);
std::size_t expected_index_bytes(std::uint64_t n, std::uint64_t k);

}  // namespace strata::quant
