// Throughput of the gradient codecs next to memcpy of the same buffer, single thread.
//
// Every benchmark counts the f32 *input* bytes (n * 4): for encode what was compressed, for
// decode what was reproduced (decode writes n floats). memcpy counts the bytes copied. The
// "ratio" counter is input bytes / wire bytes. Inputs are N(0, 1) noise, the shape of a
// gradient shard, which is the worst case for top-k (no structure to exploit).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/codec.hpp"
#include "kernels/isa.hpp"
#include "kernels/quant.hpp"
#include "bm_memcpy.hpp"

namespace {

namespace q = strata::quant;

constexpr std::size_t kSizes[] = {1u << 20, 16u << 20};

const char* const kCodecs[] = {
    "none",         "fp16",          "bf16",
    "int8",         "int4",          "int8,stochastic",
    "topk:0.01",    "topk:0.01+int8", "topk:0.01+int8,exact",
    "topk:0.001+int8", "topk:0.01+int4,stochastic", "topk:0.1+fp16",
};

// The generic kernels are shown beside the active ones for these codecs.
const char* const kGenericToo[] = {"int8", "topk:0.01+int8"};

std::string size_name(std::size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + "MiB"
                             : std::to_string(bytes >> 10) + "KiB";
}

std::vector<float> gradient(std::size_t n) {
  std::vector<float> x(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& v : x) v = d(rng);
  return x;
}

// Restores the active kernels when a benchmark that pinned other ones ends.
class IsaScope {
 public:
  explicit IsaScope(strata::kernels::Isa isa) : prev_(strata::kernels::set_isa(isa)) {}
  ~IsaScope() { strata::kernels::set_isa(prev_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  strata::kernels::Isa prev_;
};

void bm_encode(benchmark::State& state, std::string spec, strata::kernels::Isa isa, std::size_t bytes) {
  const IsaScope scope(isa);
  const auto codec = q::make_codec(spec);
  const auto x = gradient(bytes / 4);
  std::vector<std::byte> out(codec->max_wire_bytes(x.size()));
  std::size_t len = 0;
  std::uint64_t seed = 0;
  for (auto _ : state) {
    len = codec->encode(x, std::span<std::byte>(out), ++seed);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
  state.counters["ratio"] = static_cast<double>(bytes) / static_cast<double>(len);
}

void bm_decode(benchmark::State& state, std::string spec, strata::kernels::Isa isa, std::size_t bytes) {
  const IsaScope scope(isa);
  const auto codec = q::make_codec(spec);
  const auto x = gradient(bytes / 4);
  std::vector<std::byte> wire;
  codec->encode(x, wire, 1);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    codec->decode(wire, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
  state.counters["ratio"] = static_cast<double>(bytes) / static_cast<double>(wire.size());
}

void register_all() {
  const strata::kernels::Isa active = strata::kernels::active_isa();
  for (std::size_t bytes : kSizes) {
    const std::string size = size_name(bytes);
    benchmark::RegisterBenchmark(("memcpy/" + size).c_str(), strata::bench::bm_memcpy, bytes);
    for (const char* spec : kCodecs) {
      std::vector<strata::kernels::Isa> isas = {active};
      for (const char* g : kGenericToo) {
        if (std::string(g) == spec && active != strata::kernels::Isa::generic) {
          isas.push_back(strata::kernels::Isa::generic);
        }
      }
      for (const strata::kernels::Isa isa : isas) {
        const std::string tail = std::string("/") + strata::kernels::to_string(isa) + "/" + size;
        benchmark::RegisterBenchmark(("encode/" + std::string(spec) + tail).c_str(), bm_encode,
                                     std::string(spec), isa, bytes);
        benchmark::RegisterBenchmark(("decode/" + std::string(spec) + tail).c_str(), bm_decode,
                                     std::string(spec), isa, bytes);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::AddCustomContext("strata_quant_isa",
                              strata::kernels::to_string(strata::kernels::active_isa()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
