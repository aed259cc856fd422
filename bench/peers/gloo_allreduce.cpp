// strata-peer-gloo: float-sum allreduce over Gloo's TCP transport, with the
// nccl-tests size-sweep flags and strata-perf's table and JSON (the
// strata_perf_report library), so that strata can be compared against it.
//
// Launch: N processes with STRATA_RANK / STRATA_WORLD_SIZE / STRATA_RUN_ID set
// (strata-run does that; bench/peers/compare.py spawns them itself).
// Rendezvous: gloo::rendezvous::FileStore in /tmp/strata-gloo-$STRATA_RUN_ID
// (this Gloo has no TCP store). Transport: gloo::transport::tcp on 127.0.0.1.
//
// For every size, every allreduce algorithm this Gloo offers is tried and the
// fastest is reported ("Gloo's best"), named in a comment after the row and in
// the JSON field "algo". In-place only: the out-of-place columns repeat the
// in-place figure (JSON: "out_of_place_mirrors_in_place": true).

#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "perf_report.hpp"

namespace {

namespace perf = strata::perf;

struct Options {
  std::uint64_t min_bytes = 32u << 20;
  std::uint64_t max_bytes = 32u << 20;
  std::uint64_t step_bytes = 1u << 20;
  std::uint64_t step_factor = 1;
  int iters = 20;
  int warmup = 1;
  int check = 1;
  std::string json;
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

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "strata-peer-gloo: %s\n", msg.c_str());
  std::exit(2);
}

std::uint64_t parse_size(const char* s) {
  auto v = perf::parse_size(s);
  if (!v) die(std::string("bad size: ") + s);
  return *v;
}

int parse_int(const char* s, const char* what) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0') die(std::string("bad ") + what + ": " + s);
  return static_cast<int>(v);
}

double parse_double(const char* s, const char* what) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || *end != '\0') die(std::string("bad ") + what + ": " + s);
  return v;
}

void usage(const char* argv0) {
  std::printf(
      "usage: %s [options]   (one process per rank; see bench/peers/README.md)\n"
      "  -b, --minbytes SIZE      smallest message (default 32M)\n"
      "  -e, --maxbytes SIZE      largest message (default 32M)\n"
      "  -i, --stepbytes SIZE     additive step when -f is not given (default 1M)\n"
      "  -f, --stepfactor N       multiplicative step\n"
      "  -n, --iters N            timed iterations per size and algorithm (default 20)\n"
      "  -w, --warmup_iters N     warm-up iterations (default 1)\n"
      "  -c, --check 0|1          validate results (default 1)\n"
      "  -d, --datatype float     only float is supported\n"
      "  -o, --op sum             only sum is supported\n"
      "      --json FILE          write results as JSON (rank 0)\n"
      "      --algos LIST         comma list of Gloo algorithms to try (default: all):\n"
      "                           ring,ring_chunked,halving_doubling,bcube,opts_ring,opts_bcube,\n"
      "                           ring/sync,ring_chunked/sync,halving_doubling/sync,bcube/sync\n"
      "      --no-sync            leave out the /sync variants (classic algorithms on\n"
      "                           pairs in synchronous mode, on their own connections)\n"
      "      --busy-poll          synchronous pairs spin on the socket (bad when oversubscribed)\n"
      "      --sync-max-bytes SIZE  largest size for the /sync variants (default 1M): a\n"
      "                           synchronous pair deadlocks once both ends block in write()\n"
      "      --no-screen          time every algorithm fully at every size\n"
      "      --screen-us US       screen (one op each) where the fastest op takes >= US (2000)\n"
      "      --screen-factor F    ... and fully time those within F x the fastest (3.0)\n"
      "      --store-dir DIR      FileStore directory (default /tmp/strata-gloo-$STRATA_RUN_ID)\n"
      "      --timeout SECONDS    Gloo operation timeout (default 600)\n"
      "Environment: STRATA_RANK, STRATA_WORLD_SIZE, STRATA_RUN_ID (set by strata-run).\n",
      argv0);
}

Options parse_args(int argc, char** argv) {
  Options o;
  enum { kJson = 1000, kAlgos, kStore, kTimeout, kNoSync, kBusyPoll, kSyncMax, kNoScreen, kScreenUs,
         kScreenFactor };
  static const struct option longopts[] = {
      {"minbytes", required_argument, nullptr, 'b'},
      {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'},
      {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},
      {"warmup_iters", required_argument, nullptr, 'w'},
      {"check", required_argument, nullptr, 'c'},
      {"datatype", required_argument, nullptr, 'd'},
      {"op", required_argument, nullptr, 'o'},
      {"json", required_argument, nullptr, kJson},
      {"algos", required_argument, nullptr, kAlgos},
      {"store-dir", required_argument, nullptr, kStore},
      {"timeout", required_argument, nullptr, kTimeout},
      {"no-sync", no_argument, nullptr, kNoSync},
      {"busy-poll", no_argument, nullptr, kBusyPoll},
      {"sync-max-bytes", required_argument, nullptr, kSyncMax},
      {"no-screen", no_argument, nullptr, kNoScreen},
      {"screen-us", required_argument, nullptr, kScreenUs},
      {"screen-factor", required_argument, nullptr, kScreenFactor},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:c:d:o:h", longopts, nullptr)) != -1) {
    switch (c) {
      case 'b': o.min_bytes = parse_size(optarg); break;
      case 'e': o.max_bytes = parse_size(optarg); break;
      case 'i': o.step_bytes = parse_size(optarg); break;
      case 'f': o.step_factor = static_cast<std::uint64_t>(std::max(1, parse_int(optarg, "step factor"))); break;
      case 'n': o.iters = parse_int(optarg, "iteration count"); break;
      case 'w': o.warmup = parse_int(optarg, "warm-up count"); break;
      case 'c': o.check = parse_int(optarg, "check flag"); break;
      case 'd':
        if (std::strcmp(optarg, "float") != 0) die("only -d float is supported");
        break;
      case 'o':
        if (std::strcmp(optarg, "sum") != 0) die("only -o sum is supported");
        break;
      case kJson: o.json = optarg; break;
      case kAlgos: o.algos = optarg; break;
      case kStore: o.store_dir = optarg; break;
      case kTimeout: o.timeout_s = parse_int(optarg, "timeout"); break;
      case kNoSync: o.sync = false; break;
      case kBusyPoll: o.busy_poll = true; break;
      case kSyncMax: o.sync_max_bytes = parse_size(optarg); break;
      case kNoScreen: o.screen = false; break;
      case kScreenUs: o.screen_us = parse_double(optarg, "--screen-us"); break;
      case kScreenFactor:
        o.screen_factor = parse_double(optarg, "--screen-factor");
        if (!(o.screen_factor >= 1.0)) die("--screen-factor must be >= 1");
        break;
      case 'h': usage(argv[0]); std::exit(0);
      default: usage(argv[0]); std::exit(2);
    }
  }
  if (optind < argc) die(std::string("unexpected argument: ") + argv[optind]);
  if (o.iters < 1) die("-n must be >= 1");
  if (o.warmup < 0) die("-w must be >= 0");
  if (o.timeout_s < 1) die("--timeout must be >= 1");
  if (perf::sweep_sizes(o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor).empty())
    die("the -b/-e/-i/-f sweep is empty");
  return o;
}

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

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += static_cast<unsigned char>(ch) < 0x20 ? ' ' : ch;
  }
  return out + "\"";
}

std::string json_opt(const std::optional<double>& v) {
  if (!v) return "null";
  std::ostringstream os;
  os.precision(10);
  os << *v;
  return os.str();
}

// perf::format_json's document plus Gloo's extras: per result "algo" (the
// fastest) and "algos" (every algorithm's outcome), and run-level keys.
std::string gloo_json(const perf::RunInfo& info, const std::vector<Row>& rows, const Options& o) {
  std::vector<perf::ResultRow> results;
  for (const auto& r : rows) results.push_back(r.result);
  std::string doc = perf::format_json(info, results);

  // Each result object ends with "in_place":{...}} (a flat object, then the
  // result's closing brace): insert the extras before that closing brace.
  std::size_t pos = 0;
  for (const Row& r : rows) {
    std::size_t ip = doc.find("\"in_place\":{", pos);
    std::size_t close = ip == std::string::npos ? ip : doc.find('}', ip);
    if (close == std::string::npos || close + 1 >= doc.size() || doc[close + 1] != '}') {
      return perf::format_json(info, results);  // unexpected layout: plain document
    }
    std::string extra = ",\"algo\":" + json_str(r.algo) + ",\"algos\":{";
    for (std::size_t k = 0; k < r.algos.size(); ++k) {
      const AlgoStat& a = r.algos[k];
      if (k) extra += ",";
      extra += json_str(a.name) + ":{\"status\":" + json_str(a.status) + ",\"time\":" +
               json_opt(a.time_us) + ",\"screen_time\":" + json_opt(a.screen_us) + ",\"nwrong\":" +
               (a.nwrong ? std::to_string(*a.nwrong) : std::string("null")) + "}";
    }
    extra += "}";
    doc.insert(close + 1, extra);
    pos = close + 1 + extra.size() + 1;
  }
  // Run-level extras after the opening brace.
  std::ostringstream top;
  top << "\"gloo_version\":\"" << GLOO_VERSION_MAJOR << "." << GLOO_VERSION_MINOR << "."
      << GLOO_VERSION_PATCH << "\",\"iters\":" << o.iters << ",\"warmup_iters\":" << o.warmup
      << ",\"check\":" << o.check << ",\"time_reduction\":\"max_over_ranks_of_mean\""
      << ",\"out_of_place_mirrors_in_place\":true,\"sync_max_bytes\":" << o.sync_max_bytes
      << ",\"screen\":" << (o.screen ? "true" : "false") << ",\"screen_us\":" << o.screen_us
      << ",\"screen_factor\":" << o.screen_factor << ",";
  doc.insert(1, top.str());
  return doc;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) die(std::string(name) + " is not set (launch with strata-run or compare.py)");
  return parse_int(v, name);
}

using Clock = std::chrono::steady_clock;

// One allreduce algorithm bound to one buffer: construction does the
// collective set-up (slot allocation, buffer registration), run() one op.
struct Runner {
  virtual ~Runner() noexcept(false) = default;  // Gloo algorithm destructors may throw
  virtual void run() = 0;
};

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

struct AlgoSpec {
  std::string name;
  bool sync = false;  // runs on the context whose pairs are in synchronous mode
  std::function<bool(int nranks)> usable;
  std::function<std::unique_ptr<Runner>(const std::shared_ptr<gloo::Context>&, float*, size_t,
                                        std::chrono::milliseconds)>
      make;
};

std::vector<AlgoSpec> all_algorithms() {
  using Ctx = std::shared_ptr<gloo::Context>;
  using Ms = std::chrono::milliseconds;
  using Make = std::function<std::unique_ptr<Runner>(const Ctx&, float*, size_t, Ms)>;
  auto any = [](int) { return true; };
  // AllreduceBcube needs the rank count divisible by the context base (2).
  auto even = [](int n) { return n % 2 == 0; };
  struct Classic {
    const char* name;
    std::function<bool(int)> usable;
    Make make;
  };
  const std::vector<Classic> classic = {
      {"ring", any,
       [](const Ctx& c, float* b, size_t n, Ms) -> std::unique_ptr<Runner> {
         return std::make_unique<ClassicRunner<gloo::AllreduceRing>>(c, b, n);
       }},
      {"ring_chunked", any,
       [](const Ctx& c, float* b, size_t n, Ms) -> std::unique_ptr<Runner> {
         return std::make_unique<ClassicRunner<gloo::AllreduceRingChunked>>(c, b, n);
       }},
      {"halving_doubling", any,
       [](const Ctx& c, float* b, size_t n, Ms) -> std::unique_ptr<Runner> {
         return std::make_unique<ClassicRunner<gloo::AllreduceHalvingDoubling>>(c, b, n);
       }},
      {"bcube", even,
       [](const Ctx& c, float* b, size_t n, Ms) -> std::unique_ptr<Runner> {
         return std::make_unique<ClassicRunner<gloo::AllreduceBcube>>(c, b, n);
       }},
  };
  std::vector<AlgoSpec> v;
  // Classic algorithm classes on the default (asynchronous) pairs: the TCP
  // device's event loop thread moves the data, the caller waits on it.
  for (const auto& c : classic) v.push_back({c.name, false, c.usable, c.make});
  // The options-style API (gloo::allreduce(AllreduceOptions)): RING and BCUBE.
  // UNSPECIFIED selects RING in this Gloo, so it is not timed separately.
  // This is what PyTorch's ProcessGroupGloo calls.
  v.push_back({"opts_ring", false, any,
               [](const Ctx& c, float* b, size_t n, Ms t) -> std::unique_ptr<Runner> {
                 return std::make_unique<OptsRunner>(c, b, n, gloo::AllreduceOptions::Algorithm::RING, t);
               }});
  v.push_back({"opts_bcube", false, any,
               [](const Ctx& c, float* b, size_t n, Ms t) -> std::unique_ptr<Runner> {
                 return std::make_unique<OptsRunner>(c, b, n, gloo::AllreduceOptions::Algorithm::BCUBE, t);
               }});
  // Classic classes again on pairs switched to synchronous mode
  // (Pair::setSync(true, busyPoll)): the calling thread does the socket I/O
  // itself, no hand-off to the loop thread. Unbound buffers (the options API)
  // do not work on synchronous pairs.
  for (const auto& c : classic) v.push_back({std::string(c.name) + "/sync", true, c.usable, c.make});
  return v;
}

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

  void barrier() {
    gloo::BarrierOptions b(ctx_);
    b.setTag(0x5742);
    gloo::barrier(b);
  }

  // Reduce one double across ranks (max or sum) with the options API.
  double reduce_double(double v, bool max) {
    gloo::AllreduceOptions r(ctx_);
    r.setOutput(&v, 1);
    if (max) {
      r.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
    } else {
      r.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
    }
    r.setTag(0x5744);
    gloo::allreduce(r);
    return v;
  }

  // Elementwise sum of a small vector across ranks.
  std::vector<double> sum_vector(std::vector<double> v) {
    gloo::AllreduceOptions r(ctx_);
    r.setOutput(v.data(), v.size());
    r.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
    r.setTag(0x5746);
    gloo::allreduce(r);
    return v;
  }

  // Element i on rank r holds (r + 1) + (i % 7): small integers, so the
  // float sum is exact and easy to predict.
  void fill(float* buf, size_t count) const {
    const int rank = ctx_->rank;
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
  }

  long count_wrong(const float* buf, size_t count) const {
    const int n = ctx_->size;
    const float base = static_cast<float>(n * (n + 1) / 2);
    long wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float expect = base + static_cast<float>(n * static_cast<int>(i % 7));
      if (buf[i] != expect) ++wrong;
    }
    return wrong;
  }

  // Runs `iters` ops after `warmup` untimed ones; max over ranks of the mean.
  double time_ops(Runner& runner, int warmup, int iters) {
    for (int i = 0; i < warmup; ++i) runner.run();
    barrier();
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) runner.run();
    auto t1 = Clock::now();
    double mean_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
    return reduce_double(mean_us, /*max=*/true);
  }

  Row run_size(size_t count, const std::vector<AlgoSpec>& algos) {
    const std::uint64_t bytes = count * sizeof(float);
    std::vector<float> buf(count);
    const auto timeout = std::chrono::milliseconds(static_cast<long>(o_.timeout_s) * 1000);
    const double factor = *perf::bus_bw_factor("all_reduce", ctx_->size);
    Row row;
    row.result.size = bytes;
    row.result.count = count;
    row.result.type = "float";
    row.result.redop = "sum";
    row.result.root = -1;
    row.algos.resize(algos.size());

    auto make = [&](size_t i) {
      fill(buf.data(), count);
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
        fill(buf.data(), count);
        runner->run();
        double w = reduce_double(static_cast<double>(count_wrong(buf.data(), count)), /*max=*/false);
        st.nwrong = static_cast<std::int64_t>(w);
      }
      runner.reset();
      barrier();
      if (time_us < best) {
        best = time_us;
        row.algo = st.name;
        row.result.in_place = perf::make_timing(time_us, bytes, factor, st.nwrong);
      }
    }
    row.result.out_of_place = row.result.in_place;
    return row;
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
  std::vector<std::shared_ptr<gloo::Context>> algo_ctx_;
  Options o_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_args(argc, argv);
  const int rank = env_int("STRATA_RANK");
  const int nranks = env_int("STRATA_WORLD_SIZE");
  if (nranks < 1 || rank < 0 || rank >= nranks) die("STRATA_RANK / STRATA_WORLD_SIZE out of range");

  std::string dir = o.store_dir;
  if (dir.empty()) {
    const char* run_id = std::getenv("STRATA_RUN_ID");
    if (!run_id || !*run_id) die("STRATA_RUN_ID is not set and no --store-dir given");
    dir = std::string("/tmp/strata-gloo-") + run_id;
  }

  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) die("cannot create " + dir + ": " + ec.message());

    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(dir);

    auto connect = [&](const std::string& prefix) {
      gloo::rendezvous::PrefixStore store("strata-peer-gloo/" + prefix, file_store);
      auto c = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
      c->setTimeout(std::chrono::seconds(o.timeout_s));
      c->connectFullMesh(store, dev);
      return c;
    };

    auto helper = connect("helper");
    const std::vector<AlgoSpec> algos = selected_algorithms(o.algos, nranks, o.sync);
    std::vector<std::shared_ptr<gloo::Context>> algo_ctx;
    for (const AlgoSpec& a : algos) {
      auto c = connect(a.name);
      if (a.sync) {
        // One way: a pair cannot go back to asynchronous mode.
        for (int peer = 0; peer < nranks; ++peer) {
          if (peer != rank) c->getPair(peer)->setSync(true, o.busy_poll);
        }
      }
      algo_ctx.push_back(c);
    }

    Bench bench(helper, algo_ctx, o);
    std::vector<double> pids(static_cast<std::size_t>(nranks), 0.0);
    pids[static_cast<std::size_t>(rank)] = static_cast<double>(::getpid());
    pids = bench.sum_vector(pids);
    // Everyone is connected (the sum above needed all ranks): the FileStore can go.
    if (rank == 0 && o.store_dir.empty()) std::filesystem::remove_all(dir, ec);

    if (rank == 0) {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
      std::vector<perf::RankLine> lines;
      for (int r = 0; r < nranks; ++r) {
        lines.push_back(perf::RankLine{r, static_cast<long>(pids[static_cast<std::size_t>(r)]), host, ""});
      }
      std::string names;
      for (const auto& a : algos) names += (names.empty() ? "" : ",") + a.name;
      std::string notes = "#  time: max over ranks of each rank's mean; in-place only, out-of-place repeats it\n";
      notes += "#  algorithms: " + names + "; the fastest per size follows each row\n";
      if (o.sync) notes += "#  /sync variants up to " + std::to_string(o.sync_max_bytes) + " bytes\n";
      if (o.screen) {
        char line[200];
        std::snprintf(line, sizeof line,
                      "#  screening: where one op of the fastest takes >= %.0f us, only algorithms "
                      "within %.2fx of it get the full timing\n",
                      o.screen_us, o.screen_factor);
        notes += line;
      }
      perf::SweepConfig sc{o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor, o.warmup, o.iters, o.check, 0};
      const std::string library = "gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
                                  std::to_string(GLOO_VERSION_MINOR) + "." +
                                  std::to_string(GLOO_VERSION_PATCH) + " transport tcp (127.0.0.1) ranks " +
                                  std::to_string(nranks);
      std::fputs((perf::format_config_header(sc) + perf::format_rank_lines(library, lines) + notes +
                  perf::format_table_header())
                     .c_str(),
                 stdout);
      std::fflush(stdout);
    }

    std::vector<Row> rows;
    for (std::uint64_t size : perf::sweep_sizes(o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor)) {
      const std::size_t count = static_cast<std::size_t>(size / sizeof(float));
      if (count == 0) continue;
      if (count > static_cast<std::size_t>(std::numeric_limits<int>::max())) die("size too large");
      rows.push_back(bench.run_size(count, algos));
      if (rank == 0) {
        std::string line = perf::format_row(rows.back().result);
        if (!line.empty() && line.back() == '\n') line.pop_back();
        line += "  # " + rows.back().algo + "\n";
        std::fputs(line.c_str(), stdout);
        std::fflush(stdout);
      }
    }
    bench.barrier();

    std::vector<perf::ResultRow> results;
    for (const auto& r : rows) results.push_back(r.result);
    std::int64_t wrong_any = 0;  // including algorithms that were not the fastest
    for (const auto& r : rows) {
      for (const auto& a : r.algos) wrong_any += a.nwrong.value_or(0);
    }
    if (rank == 0) {
      // Wrong elements of every validated algorithm, not only the fastest.
      std::fputs(perf::format_footer(wrong_any, perf::average_bus_bw(results)).c_str(), stdout);
      std::fflush(stdout);
      if (!o.json.empty()) {
        const perf::RunInfo info{"strata-peer-gloo", "all_reduce", nranks, "gloo-tcp", "float", "sum"};
        const std::string doc = gloo_json(info, rows, o);
        std::FILE* f = std::fopen(o.json.c_str(), "w");
        if (!f || std::fwrite(doc.data(), 1, doc.size(), f) != doc.size() || std::fclose(f) != 0) {
          std::perror(("strata-peer-gloo: cannot write " + o.json).c_str());
          return 1;
        }
      }
    }
    return wrong_any ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-peer-gloo[rank %d]: %s\n", rank, e.what());
    return 3;
  }
}
