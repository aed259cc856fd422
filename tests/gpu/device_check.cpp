// strata-device-check: collectives on CUDA device buffers through libstrata's C++ API, for
// the GPU machine's check (scripts/device/check.sh). It starts --ranks local processes on
// one GPU (each an NCCL_HOSTID of its own, so that NCCL takes them for separate hosts) in
// --regions contiguous STRATA_REGIONs, and on each rank:
//   - every collective on device buffers, sizes 0, 1, odd and large, against a reference
//     (inputs are small integers, so every sum is exact whatever the order); half the
//     calls are read back on the caller's stream before Work::wait, which checks that the
//     stream waits for the call;
//   - a call mixing host and device buffers is an InvalidArgument;
//   - with --time-bytes, the allreduce timed on device buffers (median of --time-iters)
//     and the bytes each call copied between device and host.
//
// Exit status: 0, 1 when a result was wrong, 2 on an error, 77 when there is no CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "launcher.hpp"
#include "strata/strata.hpp"

namespace {

using namespace strata;

constexpr const char* kSpawnedMarker = "STRATA_DEVICE_CHECK_SPAWNED";
constexpr int kSkipped = 77;

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define CUDA_OK(call) cuda_ok((call), #call)

struct Options {
  std::size_t large = 16u << 20;  // elements of the largest correctness case
  std::size_t time_bytes = 0;
  int time_iters = 5;
};

// Rank r's element i: a small integer, so sums and products stay exact in f32.
float value(int r, std::size_t i) { return static_cast<float>(static_cast<long>((r * 7919 + i * 104729) % 7) - 3); }

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) { CUDA_OK(cudaMalloc(&p_, std::max<std::size_t>(bytes, 4))); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* get() const { return static_cast<float*>(p_); }

 private:
  void* p_ = nullptr;
};

struct Rank {
  Communicator& comm;
  cudaStream_t stream;
  int p, me;
  int calls = 0, wrong = 0;
  std::string report;

  // One call: send holds in_n elements of this rank's inputs, recv out_n; `expect` is what
  // recv must hold after (empty: recv unchecked, as a reduce's off the root).
  template <class Call>
  void check(const std::string& name, std::size_t in_n, std::size_t out_n, const std::vector<float>& expect, Call call,
             bool in_place = false) {
    std::vector<float> in(in_n);
    for (std::size_t i = 0; i < in_n; ++i) in[i] = value(me, i);
    DeviceBuffer send(in_n * 4), recv(out_n * 4);
    CUDA_OK(cudaMemcpyAsync(send.get(), in.data(), in_n * 4, cudaMemcpyHostToDevice, stream));
    CallOptions o;
    o.stream = stream;
    Work w = call(send.get(), in_place ? send.get() : recv.get(), o);
    std::vector<float> got(out_n);
    const bool stream_first = ++calls % 2 == 0;  // read back in stream order, before waiting
    if (!stream_first) w.wait();
    CUDA_OK(cudaMemcpyAsync(got.data(), in_place ? send.get() : recv.get(), out_n * 4, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    if (stream_first) w.wait();
    if (expect.empty()) return;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < out_n; ++i) bad += std::fabs(got[i] - expect[i]) > 1e-5f * std::max(1.f, std::fabs(expect[i]));
    if (bad) {
      ++wrong;
      report += "  rank " + std::to_string(me) + ": " + name + ": " + std::to_string(bad) + " of " +
                std::to_string(out_n) + " wrong" + (stream_first ? " (read in stream order)" : "") + "\n";
    }
  }

  std::vector<float> reduced(std::size_t n, ReduceOp op, std::size_t offset = 0) const {
    std::vector<float> e(n);
    for (std::size_t i = 0; i < n; ++i) {
      float acc = value(0, offset + i);
      for (int r = 1; r < p; ++r) {
        const float v = value(r, offset + i);
        acc = op == ReduceOp::max ? std::max(acc, v) : acc + v;
      }
      e[i] = op == ReduceOp::avg ? acc / static_cast<float>(p) : acc;
    }
    return e;
  }

  void every_collective(std::size_t n) {
    const auto f32 = DataType::f32;
    const std::string at = " count " + std::to_string(n);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      for (bool in_place : {false, true})
        check(std::string("allreduce ") + to_string(op) + (in_place ? " in place" : "") + at, n, n, reduced(n, op),
              [&](float* s, float* r, const CallOptions& o) { return comm.allreduce(s, r, n, f32, op, o); }, in_place);
    const auto pn = n * static_cast<std::size_t>(p);
    check("reduce_scatter" + at, pn, n, reduced(n, ReduceOp::sum, n * static_cast<std::size_t>(me)),
          [&](float* s, float* r, const CallOptions& o) { return comm.reduce_scatter(s, r, n, f32, ReduceOp::sum, o); });
    std::vector<float> gathered(pn);
    for (int r = 0; r < p; ++r)
      for (std::size_t i = 0; i < n; ++i) gathered[static_cast<std::size_t>(r) * n + i] = value(r, i);
    check("allgather" + at, n, pn, gathered,
          [&](float* s, float* r, const CallOptions& o) { return comm.allgather(s, r, n, f32, o); });
    std::vector<float> root(n);
    for (std::size_t i = 0; i < n; ++i) root[i] = value(p - 1, i);
    check("broadcast" + at, n, n, root,
          [&](float* s, float* r, const CallOptions& o) { return comm.broadcast(s, r, n, f32, p - 1, o); });
    check("reduce" + at, n, n, me == 0 ? reduced(n, ReduceOp::sum) : std::vector<float>{},
          [&](float* s, float* r, const CallOptions& o) { return comm.reduce(s, r, n, f32, ReduceOp::sum, 0, o); });
    std::vector<float> swapped(pn);
    for (int r = 0; r < p; ++r)
      for (std::size_t i = 0; i < n; ++i)
        swapped[static_cast<std::size_t>(r) * n + i] = value(r, static_cast<std::size_t>(me) * n + i);
    check("alltoall" + at, pn, pn, swapped,
          [&](float* s, float* r, const CallOptions& o) { return comm.alltoall(s, r, n, f32, o); });
  }

  void mixed_is_refused() {
    DeviceBuffer d(64 * 4);
    std::vector<float> h(64);
    ++calls;
    try {
      comm.allreduce(d.get(), h.data(), 64, DataType::f32, ReduceOp::sum).wait();
      ++wrong;
      report += "  rank " + std::to_string(me) + ": a device send with a host recv was not refused\n";
    } catch (const InvalidArgument&) {
    }
  }

  void time_allreduce(const Options& o) {
    const std::size_t n = o.time_bytes / 4;
    DeviceBuffer buf(n * 4);
    std::vector<float> in(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = value(me, i);
    CUDA_OK(cudaMemcpy(buf.get(), in.data(), n * 4, cudaMemcpyHostToDevice));
    CallOptions co;
    co.stream = stream;
    comm.allreduce(buf.get(), buf.get(), n, DataType::f32, ReduceOp::sum, co).wait();  // warm-up: NCCL's set-up
    std::vector<double> secs;
    const auto before = comm.traffic();
    for (int k = 0; k < o.time_iters; ++k) {
      comm.barrier().wait();
      const auto t0 = std::chrono::steady_clock::now();
      comm.allreduce(buf.get(), buf.get(), n, DataType::f32, ReduceOp::sum, co).wait();
      CUDA_OK(cudaStreamSynchronize(stream));
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const auto after = comm.traffic();
    std::sort(secs.begin(), secs.end());
    const double med = secs[secs.size() / 2];
    double worst = med;
    comm.allreduce(&med, &worst, 1, DataType::f64, ReduceOp::max).wait();
    const double per = 1.0 / o.time_iters;
    std::printf("[rank %d] allreduce %zu bytes on device: median %.4f s (slowest rank %.4f s), %.2f GB/s algbw; "
                "per call copied device->host %.0f bytes, host->device %.0f bytes, WAN sent %.0f bytes\n",
                me, n * 4, med, worst, static_cast<double>(n * 4) / worst / 1e9,
                static_cast<double>(after.device_to_host_bytes - before.device_to_host_bytes) * per,
                static_cast<double>(after.host_to_device_bytes - before.host_to_device_bytes) * per,
                static_cast<double>(after.wan_bytes_sent - before.wan_bytes_sent) * per);
  }
};

int run_rank(const Options& o) {
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Communicator comm = Communicator::from_env();
  Rank r{comm, stream, comm.size(), comm.rank()};
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000} + static_cast<std::size_t>(r.p),
                        std::size_t{20011}, (std::size_t{1} << 20) + 3, o.large})
    r.every_collective(n);
  r.mixed_is_refused();
  if (o.time_bytes) r.time_allreduce(o);
  int wrong = r.wrong, all_wrong = 0;
  comm.allreduce(&wrong, &all_wrong, 1, DataType::i32, ReduceOp::sum).wait();
  if (!r.report.empty()) std::fputs(r.report.c_str(), stdout);
  if (r.me == 0)
    std::printf("strata-device-check: %d ranks, %d calls each on device buffers: %s\n", r.p, r.calls,
                all_wrong ? (std::to_string(all_wrong) + " wrong").c_str() : "all correct");
  CUDA_OK(cudaStreamDestroy(stream));
  return all_wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int ranks = 4, regions = 2;
  double job_timeout_s = 300;
  CLI::App app{"strata-device-check: collectives on CUDA device buffers, ranks on one GPU"};
  app.add_option("--ranks", ranks, "local ranks to start")->check(CLI::Range(1, 64));
  app.add_option("--regions", regions, "contiguous STRATA_REGIONs the ranks are split into")->check(CLI::Range(1, 64));
  app.add_option("--large", o.large, "elements of the largest correctness case");
  app.add_option("--time-bytes", o.time_bytes, "time an allreduce of this many bytes (0: none)");
  app.add_option("--time-iters", o.time_iters, "timed calls")->check(CLI::Range(1, 1000));
  app.add_option("--job-timeout", job_timeout_s, "seconds the whole run may take")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  if (tools::env_set(kSpawnedMarker)) {
    try {
      return run_rank(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "strata-device-check: %s\n", e.what());
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("strata-device-check: skipped: no CUDA device\n");
    return kSkipped;
  }
  tools::LaunchSpec spec;
  spec.nranks = ranks;
  spec.argv.push_back(tools::self_executable());
  for (int i = 1; i < argc; ++i) spec.argv.emplace_back(argv[i]);
  spec.all_stdout = true;
  spec.timeout = std::chrono::milliseconds(static_cast<long long>(job_timeout_s * 1000));
  spec.name = "strata-device-check";
  spec.extra_env = [ranks, regions](int rank) {
    const int per = (ranks + regions - 1) / regions;
    return tools::EnvList{{kSpawnedMarker, "1"},
                          {"NCCL_HOSTID", "strata-host" + std::to_string(rank)},
                          {"STRATA_HOST", "host" + std::to_string(rank)},
                          {"STRATA_REGION", "region" + std::to_string(std::min(rank / per, regions - 1))}};
  };
  return tools::launch(spec);
}
