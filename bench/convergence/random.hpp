// Counter-based random numbers: every example, weight matrix and epoch order is derived
// from (seed, index) alone, so each rank can generate exactly its own shard of a batch
// and the data do not depend on how many ranks there are.
#pragma once

#include <cmath>
#include <cstdint>

namespace strata::convergence {

inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline std::uint64_t stream_id(std::uint64_t seed, std::uint64_t purpose, std::uint64_t index) {
  return mix64(mix64(seed ^ mix64(purpose)) ^ index);
}

// splitmix64; plenty for synthetic data and initialisation, and trivially seekable.
class Rng {
 public:
  explicit Rng(std::uint64_t state) : state_(state) {}

  std::uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return mix64(state_);
  }
  // [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::uint64_t below(std::uint64_t n) { return static_cast<std::uint64_t>(uniform() * static_cast<double>(n)); }
  // Box-Muller without caching the second value: simpler to reason about when streams are
  // re-created per example, and the cost is negligible next to the model.
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::uint64_t state_;
};

}  // namespace strata::convergence
