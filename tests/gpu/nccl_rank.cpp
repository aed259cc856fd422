#include "nccl_rank.hpp"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "perf_report.hpp"

namespace strata::gpu_check {

namespace {

using Clock = std::chrono::steady_clock;
using perf::ResultRow;
using perf::Timing;

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

void nccl_ok(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  std::string msg = std::string(what) + ": " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') msg += std::string(" (") + last + ")";
  throw std::runtime_error(msg);
}

#define CUDA_OK(call) cuda_ok((call), #call)
#define NCCL_OK(call) nccl_ok((call), #call, comm_)

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string version_text(int v, int major_div) {  // NCCL 22809 -> 2.28.9, CUDA 13000 -> 13.0
  if (major_div == 10000) return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// Rank 0 draws the id and publishes it by rename, so a reader never sees half of it.
ncclUniqueId exchange_id(int rank, const std::string& path, Clock::time_point deadline) {
  ncclUniqueId id{};
  if (rank == 0) {
    nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f.write(id.internal, sizeof(id.internal));
      if (!f) throw std::runtime_error("cannot write the NCCL id to " + tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp + " to " + path);
    return id;
  }
  while (Clock::now() < deadline) {
    std::ifstream f(path, std::ios::binary);
    if (f && f.read(id.internal, sizeof(id.internal)) && f.gcount() == sizeof(id.internal)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("rank 0 did not publish the NCCL id at " + path + " in time");
}

// What every rank tells rank 0 for the header: its process, region and NCCL host id.
struct RankInfo {
  std::int64_t pid = 0;
  char region[56] = {};
  char hostid[56] = {};
};

void copy_text(char* dst, std::size_t cap, const std::string& s) {
  std::strncpy(dst, s.c_str(), cap - 1);
  dst[cap - 1] = '\0';
}

class Sweep {
 public:
  Sweep(const SweepOptions& o, int rank, int nranks) : o_(o), me_(rank), n_(nranks) {}
  ~Sweep();
  int run(const std::string& id_path);
  // After an error: a peer may be gone, and ncclCommDestroy would wait for it.
  void abort();

 private:
  struct Place {
    float* send;
    float* recv;
    float* out;  // where this rank's output lands
  };
  Place place(Coll c, const Shape& s, bool in_place) const;
  void issue(Coll c, const Shape& s, const Place& p);
  void wait(const char* what);
  Timing group(Coll c, const Shape& s, bool in_place, int iters, const std::vector<float>& input,
               const std::vector<float>& want);
  ResultRow row(Coll c, std::uint64_t size);
  double max_over_ranks(double v);
  std::int64_t sum_over_ranks(std::int64_t v);
  void print_header();
  int iterations(std::uint64_t bytes) const;

  const SweepOptions& o_;
  int me_, n_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  float* d_send_ = nullptr;
  float* d_recv_ = nullptr;
  void* d_scalar_ = nullptr;
  std::size_t capacity_ = 0;  // elements of each buffer
};

void Sweep::abort() {
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
}

Sweep::~Sweep() {
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  cudaFree(d_send_);
  cudaFree(d_recv_);
  cudaFree(d_scalar_);
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (stop_ != nullptr) cudaEventDestroy(stop_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// NCCL reports a broken peer through the communicator, not the stream: poll both, so a
// lost connection ends the run with NCCL's message instead of hanging on the stream.
void Sweep::wait(const char* what) {
  CUDA_OK(cudaEventRecord(stop_, stream_));
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long long>(o_.timeout_s * 1000));
  for (;;) {
    const cudaError_t q = cudaEventQuery(stop_);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) cuda_ok(q, what);
    ncclResult_t async = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress) nccl_ok(async, what, comm_);
    if (Clock::now() > deadline)
      throw std::runtime_error(std::string(what) + ": not done after " + std::to_string(o_.timeout_s) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Sweep::Place Sweep::place(Coll c, const Shape& s, bool in_place) const {
  if (!in_place) return {d_send_, d_recv_, d_recv_};
  const std::size_t off = in_place_offset(c, s, me_);
  switch (c) {
    case Coll::all_gather: return {d_recv_ + off, d_recv_, d_recv_};
    case Coll::reduce_scatter: return {d_send_, d_send_ + off, d_send_ + off};
    default: return {d_recv_, d_recv_, d_recv_};
  }
}

void Sweep::issue(Coll c, const Shape& s, const Place& p) {
  switch (c) {
    case Coll::all_reduce:
      NCCL_OK(ncclAllReduce(p.send, p.recv, s.count, ncclFloat, ncclSum, comm_, stream_));
      break;
    case Coll::all_gather:
      NCCL_OK(ncclAllGather(p.send, p.recv, s.count, ncclFloat, comm_, stream_));
      break;
    case Coll::reduce_scatter:
      NCCL_OK(ncclReduceScatter(p.send, p.recv, s.count, ncclFloat, ncclSum, comm_, stream_));
      break;
    case Coll::broadcast:
      NCCL_OK(ncclBroadcast(p.send, p.recv, s.count, ncclFloat, 0, comm_, stream_));
      break;
    case Coll::sendrecv:
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclSend(p.send, s.count, ncclFloat, (me_ + 1) % n_, comm_, stream_));
      NCCL_OK(ncclRecv(p.recv, s.count, ncclFloat, (me_ + n_ - 1) % n_, comm_, stream_));
      NCCL_OK(ncclGroupEnd());
      break;
  }
}

int Sweep::iterations(std::uint64_t bytes) const {
  if (o_.scale_bytes == 0 || bytes <= o_.scale_bytes) return o_.iters;
  return std::max<int>(1, static_cast<int>(static_cast<double>(o_.iters) * static_cast<double>(o_.scale_bytes) /
                                           static_cast<double>(bytes)));
}

// One group as nccl-tests runs it: warm-up calls, the timed loop, then a fresh input and
// one more call whose output is compared with the reference.
Timing Sweep::group(Coll c, const Shape& s, bool in_place, int iters, const std::vector<float>& input,
                    const std::vector<float>& want) {
  const Place p = place(c, s, in_place);
  auto load = [&] {
    // Poison the output (NaN) first, so a call that writes nothing cannot pass the check.
    // In place, reduce_scatter's output is a block of its input, which the copy fills.
    if (!(in_place && c == Coll::reduce_scatter))
      CUDA_OK(cudaMemsetAsync(d_recv_, 0xff, s.recv * sizeof(float), stream_));
    CUDA_OK(cudaMemcpyAsync(p.send, input.data(), s.send * sizeof(float), cudaMemcpyHostToDevice, stream_));
  };
  load();
  for (int i = 0; i < o_.warmup; ++i) issue(c, s, p);
  wait("warm-up");
  CUDA_OK(cudaEventRecord(start_, stream_));
  for (int i = 0; i < iters; ++i) issue(c, s, p);
  wait("timed loop");
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, start_, stop_));
  load();
  issue(c, s, p);
  wait("checked call");
  std::vector<float> got(s.recv);
  CUDA_OK(cudaMemcpy(got.data(), p.out, s.recv * sizeof(float), cudaMemcpyDeviceToHost));
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < s.recv; ++i) wrong += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
  const double us = max_over_ranks(static_cast<double>(ms) * 1000.0 / std::max(1, iters));
  return perf::make_timing(us, s.bytes, *perf::bus_bw_factor(coll_name(c), n_), sum_over_ranks(wrong));
}

double Sweep::max_over_ranks(double v) {
  CUDA_OK(cudaMemcpyAsync(d_scalar_, &v, sizeof v, cudaMemcpyHostToDevice, stream_));
  NCCL_OK(ncclAllReduce(d_scalar_, d_scalar_, 1, ncclDouble, ncclMax, comm_, stream_));
  CUDA_OK(cudaMemcpyAsync(&v, d_scalar_, sizeof v, cudaMemcpyDeviceToHost, stream_));
  wait("max over ranks");
  return v;
}

std::int64_t Sweep::sum_over_ranks(std::int64_t v) {
  CUDA_OK(cudaMemcpyAsync(d_scalar_, &v, sizeof v, cudaMemcpyHostToDevice, stream_));
  NCCL_OK(ncclAllReduce(d_scalar_, d_scalar_, 1, ncclInt64, ncclSum, comm_, stream_));
  CUDA_OK(cudaMemcpyAsync(&v, d_scalar_, sizeof v, cudaMemcpyDeviceToHost, stream_));
  wait("sum over ranks");
  return v;
}

ResultRow Sweep::row(Coll c, std::uint64_t size) {
  const Shape s = shape(c, size, n_);
  const std::uint64_t seed = row_seed(c, size);
  std::vector<float> input(s.send), want(s.recv);
  for (std::size_t i = 0; i < s.send; ++i) input[i] = input_value(seed, me_, i);
  for (std::size_t i = 0; i < s.recv; ++i) want[i] = expected_value(c, s, seed, me_, n_, i);
  const int iters = iterations(s.bytes);
  ResultRow r;
  r.size = s.bytes;
  r.count = s.count;
  r.type = "float";
  r.redop = reduces(c) ? "sum" : "none";
  r.root = c == Coll::broadcast ? 0 : -1;
  r.out_of_place = group(c, s, false, iters, input, want);
  if (has_in_place(c)) r.in_place = group(c, s, true, iters, input, want);
  return r;
}

void Sweep::print_header() {
  RankInfo mine;
  mine.pid = ::getpid();
  copy_text(mine.region, sizeof mine.region, env_or("STRATA_REGION", "-"));
  copy_text(mine.hostid, sizeof mine.hostid, env_or("NCCL_HOSTID", "-"));
  std::vector<RankInfo> all(static_cast<std::size_t>(n_));
  void* d = nullptr;
  CUDA_OK(cudaMalloc(&d, sizeof(RankInfo) * all.size()));
  CUDA_OK(cudaMemcpyAsync(static_cast<char*>(d) + sizeof(RankInfo) * static_cast<std::size_t>(me_), &mine,
                          sizeof mine, cudaMemcpyHostToDevice, stream_));
  NCCL_OK(ncclAllGather(static_cast<char*>(d) + sizeof(RankInfo) * static_cast<std::size_t>(me_), d,
                        sizeof(RankInfo), ncclUint8, comm_, stream_));
  CUDA_OK(cudaMemcpyAsync(all.data(), d, sizeof(RankInfo) * all.size(), cudaMemcpyDeviceToHost, stream_));
  wait("rank information");
  cudaFree(d);
  if (me_ != 0) return;

  int nccl = 0, runtime = 0, driver = 0;
  ncclGetVersion(&nccl);
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, o_.device));
  char bus[32] = {};
  cudaDeviceGetPCIBusId(bus, sizeof bus, o_.device);
  perf::SweepConfig sc{o_.min_bytes, o_.max_bytes, 0, o_.step_factor, o_.warmup, o_.iters, 1, 0};
  std::vector<perf::RankLine> lines;
  for (int r = 0; r < n_; ++r) {
    const RankInfo& i = all[static_cast<std::size_t>(r)];
    lines.push_back({r, static_cast<long>(i.pid), i.hostid,
                     std::string("region ") + i.region + ", device " + std::to_string(o_.device) + " [" + bus + "] " +
                         prop.name});
  }
  std::string text = perf::format_config_header(sc);
  text += "# NCCL " + version_text(nccl, 10000) + ", CUDA runtime " + version_text(runtime, 1000) + ", driver API " +
          version_text(driver, 1000) + "\n";
  text += "# NCCL_NET_PLUGIN=" + env_or("NCCL_NET_PLUGIN", "(unset)") + " NCCL_NET=" + env_or("NCCL_NET", "(unset)") +
          " STRATA_WAN_EMULATE=" + env_or("STRATA_WAN_EMULATE", "(unset)") +
          " STRATA_WAN_TLS=" + env_or("STRATA_WAN_TLS", "0") + "\n";
  if (o_.scale_bytes != 0)
    text += "# above " + std::to_string(o_.scale_bytes) + " B, iterations shrink in proportion to size (at least 1)\n";
  text += perf::format_rank_lines("strata-nccl-perf " + o_.label + " ranks " + std::to_string(n_), lines);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

int Sweep::run(const std::string& id_path) {
  const auto init_deadline = Clock::now() + std::chrono::milliseconds(static_cast<long long>(o_.timeout_s * 1000));
  CUDA_OK(cudaSetDevice(o_.device));
  const ncclUniqueId id = exchange_id(me_, id_path, init_deadline);
  NCCL_OK(ncclCommInitRank(&comm_, n_, id, me_));
  if (me_ == 0) std::remove(id_path.c_str());
  CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_OK(cudaEventCreate(&start_));
  CUDA_OK(cudaEventCreate(&stop_));
  capacity_ = static_cast<std::size_t>(o_.max_bytes / sizeof(float)) + 1;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&d_send_), capacity_ * sizeof(float)));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&d_recv_), capacity_ * sizeof(float)));
  CUDA_OK(cudaMalloc(&d_scalar_, 16));
  print_header();

  const auto sizes = perf::sweep_sizes(o_.min_bytes, o_.max_bytes, 0, o_.step_factor);
  perf::Json runs = perf::Json::array();
  std::int64_t wrong = 0;
  for (const Coll c : o_.colls) {
    std::vector<ResultRow> rows;
    if (me_ == 0) std::printf("#\n# %s\n%s", coll_name(c).c_str(), perf::format_table_header().c_str());
    for (const std::uint64_t size : sizes) {
      rows.push_back(row(c, size));
      if (me_ == 0) {
        std::fputs(perf::format_row(rows.back()).c_str(), stdout);
        std::fflush(stdout);
      }
    }
    const std::int64_t w = perf::total_wrong(rows);
    wrong += w;
    if (me_ == 0) {
      std::fputs(perf::format_footer(w, perf::average_bus_bw(rows)).c_str(), stdout);
      std::fflush(stdout);
      const perf::RunInfo info{"strata-nccl-perf", coll_name(c), n_, o_.label, "float", reduces(c) ? "sum" : "none"};
      runs.push_back(perf::json_document(info, rows));
    }
  }
  if (me_ == 0 && !o_.json_path.empty()) {
    std::ofstream f(o_.json_path, std::ios::trunc);
    f << perf::Json{{"tool", "strata-nccl-perf"}, {"label", o_.label}, {"ranks", n_}, {"runs", runs}}.dump(1) << "\n";
    if (!f) throw std::runtime_error("cannot write " + o_.json_path);
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace

bool cuda_device_present(std::string& why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    return false;
  }
  if (n == 0) why = "no CUDA device";
  return n > 0;
}

int run_nccl_rank(const SweepOptions& o, int rank, int nranks, const std::string& id_path) {
  Sweep sweep(o, rank, nranks);
  try {
    return sweep.run(id_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-nccl-perf: rank %d: %s\n", rank, e.what());
    sweep.abort();
    return 2;
  }
}

}  // namespace strata::gpu_check
