// strata-perf: nccl-tests-compatible benchmark over the strata C++ API.
//
//   strata-perf --ranks 4 -b 8 -e 128M -f 2          # 4 local ranks
//   strata-run -n 4 -- strata-perf -t all_gather     # the same, launched explicitly
//   torchrun --nproc-per-node 8 ... strata-perf      # or mpirun, srun, plain STRATA_* vars
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "launcher.hpp"
#include "perf_bench.hpp"
#include "perf_data.hpp"
#include "perf_options.hpp"
#include "perf_report.hpp"
#include "strata/strata.hpp"

namespace {

using namespace strata;
using namespace strata::perf;

// Set on the ranks that `--ranks` (or the default local launch) started, so that they
// join the job instead of launching another one.
constexpr const char* kSpawnedMarker = "STRATA_PERF_SPAWNED";
constexpr int kDefaultLocalRanks = 2;

// Fake regions for ranks on one machine: each region is one "host", so the hierarchical
// plan reduces inside a region first and only the shards cross the (emulated) WAN.
std::string region_of(int rank, int nranks, const PerfOptions& o) {
  const int per = std::max(1, (nranks + o.regions - 1) / o.regions);
  const int r = o.interleave ? rank % o.regions : std::min(rank / per, o.regions - 1);
  return "region" + std::to_string(r);
}

int spawn_local(int nranks, int argc, char** argv, const PerfOptions& o) {
  tools::LaunchSpec spec;
  spec.nranks = nranks;
  spec.nservers = o.servers;
  spec.argv.push_back(tools::self_executable());
  for (int i = 1; i < argc; ++i) spec.argv.emplace_back(argv[i]);
  spec.all_stdout = false;  // rank 0 prints the table; the others would only add noise
  spec.name = "strata-perf";
  spec.extra_env = [nranks, &o](int rank) {
    tools::EnvList env{{kSpawnedMarker, "1"}};
    if (o.regions > 1) {
      const std::string region = region_of(rank, nranks, o);
      env.push_back({"STRATA_REGION", region});
      env.push_back({"STRATA_HOST", region + "-host"});
    }
    return env;
  };
  return tools::launch(spec);
}

std::vector<Case> expand_cases(const PerfOptions& o, int nranks, const std::string& algorithm) {
  std::vector<Case> cases;
  const std::vector<ReduceOp> no_op{ReduceOp::sum};
  std::vector<int> roots{o.root};
  if (o.all_roots) {
    roots.clear();
    for (int r = 0; r < nranks; ++r) roots.push_back(r);
  }
  // nccl-tests' nesting: type, then op, then root.
  for (const DataType dt : o.dtypes) {
    for (const ReduceOp op : reduces(o.collective) ? o.ops : no_op) {
      if (reduces(o.collective) && !op_supported(op, dt)) continue;
      for (const int root : rooted(o.collective) ? roots : std::vector<int>{-1})
        cases.push_back(Case{o.collective, dt, op, root, algorithm});
    }
  }
  return cases;
}

void print(const std::string& s) {
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

std::string requested_dtype(const PerfOptions& o) {
  return o.dtypes.size() == 1 ? nccl_type_name(o.dtypes[0]) : "all";
}

std::string requested_op(const PerfOptions& o) {
  if (!reduces(o.collective)) return "none";
  return o.ops.size() == 1 ? to_string(o.ops[0]) : "all";
}

int run_rank(const PerfOptions& o) {
  CommOptions co;
  if (o.transport == "ucx") co.transport = TransportKind::ucx;
  if (o.transport == "tcp") co.transport = TransportKind::tcp;
  co.timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000.0));
  Communicator comm = Communicator::from_env(co);
  const int me = comm.rank(), n = comm.size();
  if (!o.all_roots && rooted(o.collective) && o.root >= n) {
    if (me == 0) std::fprintf(stderr, "strata-perf: root %d is not a rank of this %d-rank job\n", o.root, n);
    return 2;
  }

  std::vector<std::int64_t> pids(static_cast<std::size_t>(n));
  const std::int64_t pid = ::getpid();
  comm.allgather(&pid, pids.data(), 1, DataType::i64).wait();
  if (me == 0) {
    SweepConfig sc{o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor,
                   o.warmup_iters, o.iters, o.check, o.blocking, o.median};
    std::vector<RankLine> lines;
    for (int r = 0; r < n; ++r) {
      const Locality& loc = comm.locality(r);
      lines.push_back(RankLine{r, static_cast<long>(pids[static_cast<std::size_t>(r)]), loc.host,
                               loc.region.empty() ? std::string() : "region " + loc.region});
    }
    print(format_config_header(sc) +
          format_rank_lines(std::string("strata ") + STRATA_VERSION_STRING + " transport " +
                                to_string(comm.transport()) + " ranks " + std::to_string(n),
                            lines) +
          format_table_header());
    if (o.compress && o.check > 0)
      print("# relErr: relative L2 error of one compressed call WITHOUT error feedback against the exact sum.\n"
            "#   Top-k keeps only a fraction of each call's values, so one call alone is far off (near 1 for\n"
            "#   topk:0.01) by design; error feedback (on in the timed calls) carries what was left out into\n"
            "#   the next calls, which is what keeps training on course (bench/convergence).\n");
  }

  Bench bench(comm, o);
  std::vector<ResultRow> rows;
  const auto sizes = o.collective == Collective::barrier
                         ? std::vector<std::uint64_t>{0}
                         : sweep_sizes(o.min_bytes, o.max_bytes, o.step_bytes, o.step_factor);
  // --algo: one block of rows per algorithm, each under a comment line naming it; with
  // --by-size the blocks take turns, one size at a time.
  struct Sweep {
    std::string algo;
    std::vector<Case> cases;
  };
  std::vector<Sweep> sweeps;
  for (const std::string& algo : algorithms_to_run(o, [&](CollectiveKind k, DataType dt) { return comm.algorithms(k, dt); }))
    sweeps.push_back({algo, expand_cases(o, n, algo)});
  const std::string* named = nullptr;
  auto run_row = [&](const Sweep& s, const Case& c, std::uint64_t size) {
    if (me == 0 && !o.algo.empty() && named != &s.algo)
      print("# algorithm " + (s.algo.empty() ? std::string("auto (the library's choice)") : s.algo) + "\n");
    named = &s.algo;
    rows.push_back(bench.run(c, size));
    if (me == 0) print(format_row(rows.back()));
  };
  if (o.by_size) {
    for (const std::uint64_t size : sizes)
      for (const Sweep& s : sweeps)
        for (const Case& c : s.cases) run_row(s, c, size);
  } else {
    for (const Sweep& s : sweeps)
      for (const Case& c : s.cases)
        for (const std::uint64_t size : sizes) run_row(s, c, size);
  }
  const std::int64_t wrong = total_wrong(rows);
  if (me == 0) {
    print(format_footer(wrong, average_bus_bw(rows)) + format_wan_summary(rows) + [&] {
      const auto p = comm.wan_path();
      return format_wan_path(p.rtt_s, p.srtt_s, p.rate_bytes_per_s, p.streams, p.loss);
    }());
    if (!o.json_path.empty()) {
      const RunInfo info{"strata-perf", collective_name(o.collective), n, to_string(comm.transport()),
                         requested_dtype(o), requested_op(o)};
      if (!write_json_file(o.json_path, info, rows)) {
        std::perror(("strata-perf: cannot write " + o.json_path).c_str());
        return 1;
      }
    }
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const ParsedOptions parsed = parse_perf_options(argc, argv);
  if (!parsed.options) return parsed.exit_code;
  const PerfOptions& o = *parsed.options;
  try {
    // A dedicated server started by --servers serves the workers' job and ends.
    if (is_server_process()) {
      const ServerStats st = serve_from_env();
      std::fprintf(stderr, "strata-perf: dedicated server done: %llu collectives\n",
                   static_cast<unsigned long long>(st.operations));
      return 0;
    }
    if (!tools::env_set(kSpawnedMarker)) {
      if (o.ranks) return spawn_local(*o.ranks, argc, argv, o);
      if (!tools::launched_externally()) return spawn_local(kDefaultLocalRanks, argc, argv, o);
    }
    return run_rank(o);
  } catch (const std::exception& e) {
    const char* rank = std::getenv("STRATA_RANK");
    std::fprintf(stderr, "strata-perf%s%s: %s\n", rank ? ": rank " : "", rank ? rank : "", e.what());
    return 1;
  }
}
