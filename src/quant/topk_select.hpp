// Which elements a top-k codec keeps.
//
// Order: larger |x| first, and among equal magnitudes the lower index first (so the kept
// set is a function of the input alone); NaNs count as the largest magnitudes. Zeros (of
// either sign) are never kept: sending one changes nothing at the receiver. So both
// selectors return min(k, nonzeros) or fewer elements, as ascending indices, and every
// kept element precedes every dropped nonzero element in the order above.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace strata::quant {

// The sampled selector aims for a kept count in [(1 - tol) k, k].
inline constexpr double kSampledTolerance = 0.1;

struct TopkStats {
  std::uint32_t threshold_key = 0;  // magnitude key of the cut (see kernels::magnitude_key)
  int passes = 0;                   // O(n) passes over the input
  std::size_t candidates = 0;       // elements at or above the threshold before the cut to k
};

// Exactly the top min(k, nonzeros). O(n) expected time, O(n) scratch.
void select_topk_exact(std::span<const float> x, std::size_t k, std::vector<std::uint32_t>& out,
                       TopkStats* stats = nullptr);

// DGC-style: candidate thresholds come from a ~1% strided sample (several per counting
// pass, so one O(n) pass usually brackets k), later ones from the sample keys inside the
// bracket. It stops at a threshold passing between (1 - tol) k and (1 + tol) k elements,
// or at one whose surplus over k is small enough (n / 128) that cutting it is cheaper than
// another pass; a surplus is cut to exactly k, which then equals the exact selection.
// Inputs too small to sample, or k too small for the sample to resolve, use the exact
// method. O(n) time; typically two passes over the input (count, extract).
void select_topk_sampled(std::span<const float> x, std::size_t k,
                         std::vector<std::uint32_t>& out, TopkStats* stats = nullptr);

}  // namespace strata::quant
