// Throughput of the reduction kernels next to memcpy of the same buffer size.
//
// Every benchmark counts *input* bytes: 2 x size for reduce (two operands), 1 x size for
// memcpy. Memory traffic is 3 x size for reduce (2 reads, 1 write) and 2 x size for memcpy,
// so a reduce that runs at memcpy's bandwidth shows 4/3 of memcpy's bytes_per_second.
// 256 KiB per buffer stays in L2; 16 MiB per buffer goes to DRAM on most machines.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/reduce.hpp"
#include "base/half.hpp"
#include "strata/types.hpp"
#include "bm_memcpy.hpp"

namespace {

using strata::DataType;
using strata::ReduceOp;
using strata::kernels::Isa;

constexpr std::size_t kSizes[] = {256u << 10, 16u << 20};

std::string size_name(std::size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + "MiB"
                             : std::to_string(bytes >> 10) + "KiB";
}

// Ordinary finite values, so no path is slowed by subnormals or NaN handling.
std::vector<std::uint64_t> make_operand(DataType dt, std::size_t bytes, unsigned seed) {
  std::vector<std::uint64_t> words(bytes / 8);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(0.5f, 2.0f);
  const std::size_t n = bytes / strata::dtype_size(dt);
  auto* p = words.data();
  for (std::size_t i = 0; i < n; ++i) {
    switch (dt) {
      case DataType::f32: reinterpret_cast<float*>(p)[i] = val(rng); break;
      case DataType::f64: reinterpret_cast<double*>(p)[i] = val(rng); break;
      case DataType::f16:
        reinterpret_cast<std::uint16_t*>(p)[i] = strata::core::float_to_f16(val(rng));
        break;
      case DataType::bf16:
        reinterpret_cast<std::uint16_t*>(p)[i] = strata::core::float_to_bf16(val(rng));
        break;
      case DataType::i32:
        reinterpret_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(rng());
        break;
      default: reinterpret_cast<std::uint8_t*>(p)[i] = static_cast<std::uint8_t>(rng()); break;
    }
  }
  return words;
}

void bm_reduce(benchmark::State& state, Isa isa, DataType dt, ReduceOp op,
               std::size_t bytes) {
  const auto a = make_operand(dt, bytes, 1);
  const auto b = make_operand(dt, bytes, 2);
  std::vector<std::uint64_t> out(bytes / 8);
  const std::size_t n = bytes / strata::dtype_size(dt);
  for (auto _ : state) {
    strata::kernels::reduce(isa, dt, op, out.data(), a.data(), b.data(), n);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 *
                          static_cast<std::int64_t>(bytes));
}

struct Case {
  DataType dt;
  ReduceOp op;
};
constexpr Case kCases[] = {
    {DataType::f32, ReduceOp::sum},  {DataType::f64, ReduceOp::sum}, {DataType::f16, ReduceOp::sum},
    {DataType::bf16, ReduceOp::sum}, {DataType::i32, ReduceOp::sum}, {DataType::f32, ReduceOp::max},
};

void register_all() {
  const Isa active = strata::kernels::active_isa();
  for (std::size_t bytes : kSizes) {
    const std::string size = size_name(bytes);
    benchmark::RegisterBenchmark(("memcpy/" + size).c_str(), strata::bench::bm_memcpy, bytes);
    for (const Case& c : kCases) {
      // The active variant is what production runs; the generic one is shown beside it
      // so the gain of the wider variant can be read off.
      for (Isa isa : {active, Isa::generic}) {
        const std::string name = std::string("reduce/") + strata::to_string(c.dt) + "_" +
                                 strata::to_string(c.op) + "/" +
                                 strata::kernels::to_string(isa) + "/" + size;
        benchmark::RegisterBenchmark(name.c_str(), bm_reduce, isa, c.dt, c.op, bytes);
        if (active == Isa::generic) break;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::AddCustomContext("strata_kernel_isa", strata::kernels::to_string(
                                                       strata::kernels::active_isa()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
