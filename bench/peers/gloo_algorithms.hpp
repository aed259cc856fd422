// strata-peer-gloo's allreduce algorithm variants and the per-size bench
// that screens and times them (gloo_algorithms.cpp); gloo_allreduce.cpp has
// the flags, the report and main().

#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "peer_common.hpp"

namespace strata::peers::gloo_peer {

struct Options : SweepOptions {
  std::string algos;      // comma list; empty = all
  std::string store_dir;  // override for the FileStore directory
  int timeout_s = 600;    // Gloo per-operation timeout
  bool sync = true;       // also time the classic algorithms on synchronous pairs
  bool busy_poll = false; // synchronous pairs spin instead of blocking in recv
  std::uint64_t sync_max_bytes = 1u << 20;  // largest size the /sync variants run at
  bool screen = true;          // screen algorithms with one op before full timing
  double screen_us = 2000;     // ... where the fastest screening op takes this long
  double screen_factor = 3.0;  // ... keeping those within this factor of it
};

// Per-algorithm outcome at one size.
struct AlgoStat {
  std::string name;
  std::string status;               // timed | screened_out | skipped_sync_limit
  std::optional<double> time_us;    // full -w/-n timing
  std::optional<double> screen_us;  // single screening op
  std::optional<std::int64_t> nwrong;
};

struct Row {
  perf::ResultRow result;
  std::string algo;  // the fastest
  std::vector<AlgoStat> algos;
};

// One allreduce algorithm bound to one buffer: construction does the
// collective set-up (slot allocation, buffer registration), run() one op.
struct Runner {
  virtual ~Runner() noexcept(false) = default;  // Gloo algorithm destructors may throw
  virtual void run() = 0;
};

struct AlgoSpec {
  std::string name;
  bool sync = false;  // runs on the context whose pairs are in synchronous mode
  std::function<bool(int nranks)> usable;
  std::function<std::unique_ptr<Runner>(const std::shared_ptr<gloo::Context>&, float*, std::size_t,
                                        std::chrono::milliseconds)>
      make;
};

// The --algos list (empty: every algorithm usable at nranks, the /sync ones
// only with_sync); dies on an unknown or unusable name.
std::vector<AlgoSpec> selected_algorithms(const std::string& list, int nranks, bool with_sync);

class Bench {
 public:
  // helper: asynchronous mesh for barriers and the max/sum of timings;
  // algo_ctx[i]: a mesh of its own for algos[i], so that one algorithm's
  // leftovers on a connection cannot slow down the next one (it did: the
  // options-API ring ran ~500x slower right after AllreduceRingChunked on the
  // same pairs at 4 ranks, 16 MiB).
  Bench(std::shared_ptr<gloo::Context> helper, std::vector<std::shared_ptr<gloo::Context>> algo_ctx,
        const Options& o)
      : ctx_(std::move(helper)), algo_ctx_(std::move(algo_ctx)), o_(o) {}

  void barrier();

  // Reduce one double across ranks (max or sum) with the options API.
  double reduce_double(double v, bool max);

  // Elementwise sum of a small vector across ranks.
  std::vector<double> sum_vector(std::vector<double> v);

  // Runs `iters` ops after `warmup` untimed ones; max over ranks of the mean.
  double time_ops(Runner& runner, int warmup, int iters);

  // Screens and times every algorithm at count floats; the fastest is the row's.
  Row run_size(std::size_t count, const std::vector<AlgoSpec>& algos);

 private:
  std::shared_ptr<gloo::Context> ctx_;
  std::vector<std::shared_ptr<gloo::Context>> algo_ctx_;
  Options o_;
};

}  // namespace strata::peers::gloo_peer
