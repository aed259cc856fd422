// Random inputs and a reference reduction for every dtype and op, for checking
// multi-rank results. Integer results must match exactly (with wrap-around); floating
// results within a bound proportional to the rank count and the type's unit roundoff.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/types.hpp"

namespace strata::test {

using Bytes = std::vector<unsigned char>;

// n elements of dt, deterministic in seed. Values keep products and sums in range.
Bytes random_elements(DataType dt, ReduceOp op, std::size_t n, std::uint64_t seed);

// Expected element-wise reduction of inputs[0..p) (each n elements of dt).
struct Expected {
  std::vector<double> value;    // floating types
  std::vector<double> abs_sum;  // floating types: sum of |inputs|, scales the bound
  std::vector<std::int64_t> exact;  // integer types
};
Expected reference(DataType dt, ReduceOp op, const std::vector<Bytes>& inputs, std::size_t n);

// Number of elements of got[0..n) that are outside the bound of expected[offset..].
std::size_t mismatches(DataType dt, ReduceOp op, const void* got, const Expected& e,
                       std::size_t offset, std::size_t n, int nranks);

std::uint64_t hash_bytes(const void* p, std::size_t n);

}  // namespace strata::test
