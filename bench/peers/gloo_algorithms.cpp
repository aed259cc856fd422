// strata-peer-gloo's allreduce algorithm variants: Gloo's classic algorithm
// classes, the options-style API, and the classic classes again on
// synchronous pairs; and the bench that screens and times them at one size.

#include "gloo_algorithms.hpp"

#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/math.h>

#include <algorithm>
#include <limits>
#include <sstream>

namespace strata::peers::gloo_peer {

namespace {

using Clock = std::chrono::steady_clock;

template <template <typename> class Algo>
struct ClassicRunner : Runner {
  Algo<float> algo;
  ClassicRunner(const std::shared_ptr<gloo::Context>& ctx, float* buf, size_t count)
      : algo(ctx, std::vector<float*>{buf}, static_cast<int>(count)) {}
  void run() override { algo.run(); }
};

struct OptsRunner : Runner {
  gloo::AllreduceOptions opts;
  OptsRunner(const std::shared_ptr<gloo::Context>& ctx, float* buf, size_t count,
             gloo::AllreduceOptions::Algorithm a, std::chrono::milliseconds timeout)
      : opts(ctx) {
    opts.setAlgorithm(a);
    opts.setOutput(buf, count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(0x5745);  // operations are strictly sequential
    opts.setTimeout(timeout);
  }
  void run() override { gloo::allreduce(opts); }
};

using Ctx = std::shared_ptr<gloo::Context>;
using Ms = std::chrono::milliseconds;
using Make = std::function<std::unique_ptr<Runner>(const Ctx&, float*, size_t, Ms)>;

// Makers for a classic algorithm class and for an options-API algorithm.
template <template <typename> class Algo>
Make classic_maker() {
  return [](const Ctx& c, float* b, size_t n, Ms) -> std::unique_ptr<Runner> {
    return std::make_unique<ClassicRunner<Algo>>(c, b, n);
  };
}

Make opts_maker(gloo::AllreduceOptions::Algorithm a) {
  return [a](const Ctx& c, float* b, size_t n, Ms t) -> std::unique_ptr<Runner> {
    return std::make_unique<OptsRunner>(c, b, n, a, t);
  };
}

std::vector<AlgoSpec> all_algorithms() {
  auto any = [](int) { return true; };
  // AllreduceBcube needs the rank count divisible by the context base (2).
  auto even = [](int n) { return n % 2 == 0; };
  struct Classic {
    const char* name;
    std::function<bool(int)> usable;
    Make make;
  };
  const std::vector<Classic> classic = {
      {"ring", any, classic_maker<gloo::AllreduceRing>()},
      {"ring_chunked", any, classic_maker<gloo::AllreduceRingChunked>()},
      {"halving_doubling", any, classic_maker<gloo::AllreduceHalvingDoubling>()},
      {"bcube", even, classic_maker<gloo::AllreduceBcube>()},
  };
  std::vector<AlgoSpec> v;
  // Classic algorithm classes on the default (asynchronous) pairs: the TCP
  // device's event loop thread moves the data, the caller waits on it.
  for (const auto& c : classic) v.push_back({c.name, false, c.usable, c.make});
  // The options-style API (gloo::allreduce(AllreduceOptions)): RING and BCUBE.
  // UNSPECIFIED selects RING in this Gloo, so it is not timed separately.
  // This is what PyTorch's ProcessGroupGloo calls.
  v.push_back({"opts_ring", false, any, opts_maker(gloo::AllreduceOptions::Algorithm::RING)});
  v.push_back({"opts_bcube", false, any, opts_maker(gloo::AllreduceOptions::Algorithm::BCUBE)});
  // Classic classes again on pairs switched to synchronous mode
  // (Pair::setSync(true, busyPoll)): the calling thread does the socket I/O
  // itself, no hand-off to the loop thread. Unbound buffers (the options API)
  // do not work on synchronous pairs.
  for (const auto& c : classic) v.push_back({std::string(c.name) + "/sync", true, c.usable, c.make});
  return v;
}

}  // namespace

std::vector<AlgoSpec> selected_algorithms(const std::string& list, int nranks, bool with_sync) {
  std::vector<AlgoSpec> all = all_algorithms();
  std::vector<AlgoSpec> out;
  if (list.empty()) {
    for (auto& a : all) {
      if (a.usable(nranks) && (with_sync || !a.sync)) out.push_back(a);
    }
    return out;
  }
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) continue;
    auto it = std::find_if(all.begin(), all.end(), [&](const AlgoSpec& a) { return a.name == name; });
    if (it == all.end()) die("unknown algorithm '" + name + "'");
    if (!it->usable(nranks)) die("algorithm '" + name + "' does not support " + std::to_string(nranks) + " ranks");
    if (it->sync && !with_sync) die("algorithm '" + name + "' needs synchronous pairs (drop --no-sync)");
    out.push_back(*it);
  }
  if (out.empty()) die("--algos selects nothing");
  return out;
}


void Bench::barrier() {
  gloo::BarrierOptions b(ctx_);
  b.setTag(0x5742);
  gloo::barrier(b);
}

double Bench::reduce_double(double v, bool max) {
  gloo::AllreduceOptions r(ctx_);
  r.setOutput(&v, 1);
  if (max) {
    r.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
  } else {
    r.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
  }
  r.setTag(0x5744);
  gloo::allreduce(r);
  return v;
}

std::vector<double> Bench::sum_vector(std::vector<double> v) {
  gloo::AllreduceOptions r(ctx_);
  r.setOutput(v.data(), v.size());
  r.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
  r.setTag(0x5746);
  gloo::allreduce(r);
  return v;
}

double Bench::time_ops(Runner& runner, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) runner.run();
  barrier();
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) runner.run();
  auto t1 = Clock::now();
  double mean_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
  return reduce_double(mean_us, /*max=*/true);
}

Row Bench::run_size(size_t count, const std::vector<AlgoSpec>& algos) {
  std::vector<float> buf(count);
  const auto timeout = std::chrono::milliseconds(static_cast<long>(o_.timeout_s) * 1000);
  const double factor = *perf::bus_bw_factor("all_reduce", ctx_->size);
  Row row;
  row.result = allreduce_row(count);
  const std::uint64_t bytes = row.result.size;
  row.algos.resize(algos.size());

  auto make = [&](size_t i) {
    fill_pattern(buf.data(), count, ctx_->rank);
    return algos[i].make(algo_ctx_[i], buf.data(), count, timeout);
  };

  // Which algorithms run at this size: synchronous pairs deadlock once a
  // message outgrows the socket buffers (both ends blocked in write()), so
  // the /sync variants stop at --sync-max-bytes.
  std::vector<size_t> eligible;
  for (size_t i = 0; i < algos.size(); ++i) {
    row.algos[i].name = algos[i].name;
    if (algos[i].sync && bytes > o_.sync_max_bytes) {
      row.algos[i].status = "skipped_sync_limit";
    } else {
      eligible.push_back(i);
    }
  }

  // Screening: one warm-up op and one timed op per algorithm. Where the
  // fastest single op costs at least --screen-us, only algorithms within
  // --screen-factor of it get the full -w/-n timing.
  std::vector<size_t> finalists = eligible;
  if (o_.screen && eligible.size() > 1) {
    double best_screen = std::numeric_limits<double>::infinity();
    for (size_t i : eligible) {
      auto runner = make(i);
      double t = time_ops(*runner, 1, 1);
      runner.reset();
      row.algos[i].screen_us = t;
      best_screen = std::min(best_screen, t);
    }
    if (best_screen >= o_.screen_us) {
      finalists.clear();
      for (size_t i : eligible) {
        if (*row.algos[i].screen_us <= o_.screen_factor * best_screen) {
          finalists.push_back(i);
        } else {
          row.algos[i].status = "screened_out";
        }
      }
    }
  }

  double best = std::numeric_limits<double>::infinity();
  for (size_t i : finalists) {
    auto runner = make(i);
    double time_us = time_ops(*runner, o_.warmup, o_.iters);
    AlgoStat& st = row.algos[i];
    st.status = "timed";
    st.time_us = time_us;
    if (o_.check) {
      fill_pattern(buf.data(), count, ctx_->rank);
      runner->run();
      double w = reduce_double(static_cast<double>(count_wrong(buf.data(), count, ctx_->size)), /*max=*/false);
      st.nwrong = static_cast<std::int64_t>(w);
    }
    runner.reset();
    barrier();
    // A variant that computes a wrong sum is no competitor (Gloo's legacy bcube does at
    // 6 ranks); it stays in the JSON with its count of wrong values.
    if (time_us < best && st.nwrong.value_or(0) == 0) {
      best = time_us;
      row.algo = st.name;
      row.result.in_place = perf::make_timing(time_us, bytes, factor, st.nwrong);
    }
  }
  row.result.out_of_place = row.result.in_place;
  return row;
}

}  // namespace strata::peers::gloo_peer
