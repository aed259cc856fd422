// strata-codec-check: libstrata-cuda's value codecs against the CPU's, on the GPU machine
// (scripts/device/check.sh). For every coding (f32, fp16, bf16, int8, int4), rounding
// (nearest, stochastic) and size (0, 1, odd, blocks cut short, tens of millions), on
// random data with NaN, infinity, zero and tiny blocks planted: the encoded bytes must be
// the CPU's, byte for byte, and decoding (plain and adding) must give the CPU's floats,
// bit for bit. Then each encoding's throughput on 256 MiB of floats, as a fraction of the
// device's own copy of the same bytes.
//
// Exit status: 0, 1 when a result differed, 2 on an error, 77 when there is no CUDA device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "device/cuda_kernels.hpp"
#include "kernels/quant.hpp"
#include "quant/value_coding.hpp"
#include "quant/wire.hpp"

namespace {

using namespace strata;
using quant::ValueCoding;

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define CUDA_OK(call) cuda_ok((call), #call)
void kernel_ok(int e, const char* what) { cuda_ok(static_cast<cudaError_t>(e), what); }

struct DeviceBytes {
  explicit DeviceBytes(std::size_t n) { CUDA_OK(cudaMalloc(&p, std::max<std::size_t>(n, 16))); }
  ~DeviceBytes() { cudaFree(p); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* p = nullptr;
};

std::vector<float> random_floats(std::size_t n, std::uint32_t block, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(n);
  for (auto& v : x) v = d(g) * 1e-3f;
  // Planted blocks: a NaN, an infinity, all zeros, tiny values (the division path), and
  // subnormal floats for the half conversions.
  const std::size_t blocks = n / block;
  auto fill = [&](std::size_t b, auto f) {
    for (std::size_t j = 0; j < block && b * block + j < n; ++j) x[b * block + j] = f(j);
  };
  if (blocks > 5) {
    x[1 * block + 3] = std::numeric_limits<float>::quiet_NaN();
    x[2 * block + 1] = -std::numeric_limits<float>::infinity();
    fill(3, [](std::size_t) { return 0.f; });
    fill(4, [](std::size_t j) { return static_cast<float>(j % 5) * 1e-30f - 1e-30f; });
    fill(5, [](std::size_t j) { return static_cast<float>(j) * 1e-42f; });
  }
  return x;
}

struct Check {
  const device::CudaKernels& k;
  cudaStream_t s;
  int failed = 0, cases = 0;

  void one(ValueCoding v, bool stochastic, std::size_t n, std::uint32_t block) {
    ++cases;
    const auto x = random_floats(n, block, n * 31 + static_cast<unsigned>(v) * 7 + stochastic);
    const auto r = kernels::make_rounding(stochastic, 0x5eed0000u + n);
    const std::size_t bytes = quant::wire::value_bytes(v, n, block);
    std::vector<std::byte> cpu(bytes), gpu(bytes);
    quant::encode_values(v, x.data(), n, block, r, cpu.data());
    DeviceBytes dx(n * 4), denc(bytes), dout(n * 4);
    CUDA_OK(cudaMemcpy(dx.p, x.data(), n * 4, cudaMemcpyHostToDevice));
    kernel_ok(k.encode_values(static_cast<int>(v), static_cast<const float*>(dx.p), n, block, r.stochastic, r.s0, r.s1,
                              denc.p, s),
              "encode_values");
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(gpu.data(), denc.p, bytes, cudaMemcpyDeviceToHost));
    const std::string name = std::string(quant::to_string(v)) + (stochastic ? " stochastic" : "") + " n " +
                             std::to_string(n) + " block " + std::to_string(block);
    if (std::memcmp(cpu.data(), gpu.data(), bytes) != 0) {
      std::size_t first = 0;
      while (cpu[first] == gpu[first]) ++first;
      std::printf("DIFFERENT encode %s: first at byte %zu of %zu (cpu %02x, gpu %02x)\n", name.c_str(), first, bytes,
                  static_cast<unsigned>(cpu[first]), static_cast<unsigned>(gpu[first]));
      ++failed;
      return;
    }
    // Decoding the CPU's bytes, plain and added onto x.
    for (int add = 0; add < 2; ++add) {
      std::vector<float> want = x, got(n);
      quant::decode_values(v, cpu.data(), n, block, want.data(), add != 0);
      CUDA_OK(cudaMemcpy(dout.p, x.data(), n * 4, cudaMemcpyHostToDevice));
      kernel_ok(k.decode_values(static_cast<int>(v), denc.p, n, block, static_cast<float*>(dout.p), add, s),
                "decode_values");
      CUDA_OK(cudaStreamSynchronize(s));
      CUDA_OK(cudaMemcpy(got.data(), dout.p, n * 4, cudaMemcpyDeviceToHost));
      if (n && std::memcmp(want.data(), got.data(), n * 4) != 0) {
        std::printf("DIFFERENT decode%s %s\n", add ? " (add)" : "", name.c_str());
        ++failed;
      }
    }
  }

  // Seconds per call of f, median of `reps`, timed with CUDA events on the stream.
  template <class F>
  double seconds(F f, int reps) {
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    std::vector<double> t;
    f();
    for (int i = 0; i < reps; ++i) {
      CUDA_OK(cudaEventRecord(a, s));
      f();
      CUDA_OK(cudaEventRecord(b, s));
      CUDA_OK(cudaEventSynchronize(b));
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms / 1e3);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }

  void throughput(std::size_t n, std::uint32_t block) {
    DeviceBytes dx(n * 4), dy(n * 4), denc(n * 4 + 4 * (n / block + 1));
    CUDA_OK(cudaMemset(dx.p, 0x3c, n * 4));
    const double copy = seconds([&] { CUDA_OK(cudaMemcpyAsync(dy.p, dx.p, n * 4, cudaMemcpyDeviceToDevice, s)); }, 5);
    std::printf("device copy of %zu MiB: %.3f ms (%.0f GB/s read+write)\n", n * 4 >> 20, copy * 1e3,
                2.0 * n * 4 / copy / 1e9);
    for (ValueCoding v : {ValueCoding::fp16, ValueCoding::bf16, ValueCoding::int8, ValueCoding::int4})
      for (int st = 0; st < 2; ++st) {
        const double t = seconds(
            [&] {
              kernel_ok(k.encode_values(static_cast<int>(v), static_cast<const float*>(dx.p), n, block, st, 1, 2, denc.p, s),
                        "encode_values");
            },
            5);
        std::printf("encode %s%s: %.3f ms, %.0f%% of the copy's rate\n", quant::to_string(v), st ? " stochastic" : "",
                    t * 1e3, 100.0 * copy / t);
      }
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string library;
  std::size_t big = std::size_t{64} << 20;
  CLI::App app{"strata-codec-check: libstrata-cuda's value codecs against the CPU's"};
  app.add_option("--library", library, "libstrata-cuda.so to test (default: beside libstrata)");
  app.add_option("--throughput-elements", big, "floats for the throughput rows (0: none)");
  CLI11_PARSE(app, argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("strata-codec-check: skipped: no CUDA device\n");
    return 77;
  }
  try {
    const device::CudaKernels* k = device::cuda_kernels(library);
    if (!k) throw std::runtime_error(device::why_no_kernels());
    cudaStream_t s = nullptr;
    CUDA_OK(cudaStreamCreate(&s));
    Check c{*k, s};
    for (ValueCoding v : {ValueCoding::f32, ValueCoding::fp16, ValueCoding::bf16, ValueCoding::int8, ValueCoding::int4})
      for (bool st : {false, true})
        for (std::uint32_t block : {256u, 2048u})
          for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4097},
                                std::size_t{1000003}, std::size_t{(1u << 24) + 5}})
            c.one(v, st, n, block);
    std::printf("strata-codec-check: %d of %d cases differ from the CPU's\n", c.failed, c.cases);
    if (big) c.throughput(big, 256);
    CUDA_OK(cudaStreamDestroy(s));
    return c.failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-codec-check: %s\n", e.what());
    return 2;
  }
}
