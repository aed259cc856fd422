// The memcpy baseline that both micro-benchmarks report their kernels against: one
// pass of `bytes` from one buffer to another, the memory bandwidth a kernel could reach.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace strata::bench {

inline void bm_memcpy(benchmark::State& state, std::size_t bytes) {
  const std::vector<char> src(bytes, 1);
  std::vector<char> dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

}  // namespace strata::bench
