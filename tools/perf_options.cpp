#include "perf_options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "collectives/registry.hpp"

#include "perf_data.hpp"
#include "perf_report.hpp"

namespace strata::perf {

namespace {

struct CollectiveName {
  const char* name;
  Collective value;
};

constexpr CollectiveName kCollectiveNames[] = {
    {"all_reduce", Collective::all_reduce},       {"allreduce", Collective::all_reduce},
    {"reduce_scatter", Collective::reduce_scatter}, {"reducescatter", Collective::reduce_scatter},
    {"all_gather", Collective::all_gather},       {"allgather", Collective::all_gather},
    {"broadcast", Collective::broadcast},         {"bcast", Collective::broadcast},
    {"reduce", Collective::reduce},               {"sendrecv", Collective::sendrecv},
    {"alltoall", Collective::alltoall},           {"all_to_all", Collective::alltoall},
    {"barrier", Collective::barrier},
};

CLI::Validator size_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return parse_size(s) ? std::string() : "'" + s + "' is not a size (e.g. 8, 1K, 32M, 1G)";
      },
      "SIZE");
}

std::uint64_t size_of(const std::string& s) { return *parse_size(s); }

}  // namespace

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_gather: return "all_gather";
    case Collective::broadcast: return "broadcast";
    case Collective::reduce: return "reduce";
    case Collective::sendrecv: return "sendrecv";
    case Collective::alltoall: return "alltoall";
    case Collective::barrier: return "barrier";
  }
  return "unknown";
}

std::optional<Collective> parse_collective(const std::string& name) {
  for (const auto& c : kCollectiveNames)
    if (name == c.name) return c.value;
  return std::nullopt;
}

bool reduces(Collective c) {
  return c == Collective::all_reduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

bool rooted(Collective c) { return c == Collective::broadcast || c == Collective::reduce; }

std::optional<CollectiveKind> collective_kind(Collective c) {
  switch (c) {
    case Collective::all_reduce: return CollectiveKind::allreduce;
    case Collective::reduce_scatter: return CollectiveKind::reduce_scatter;
    case Collective::all_gather: return CollectiveKind::allgather;
    case Collective::broadcast: return CollectiveKind::broadcast;
    case Collective::reduce: return CollectiveKind::reduce;
    case Collective::barrier: return CollectiveKind::barrier;
    case Collective::sendrecv:
    case Collective::alltoall: return std::nullopt;  // no algorithm to choose
  }
  return std::nullopt;
}

std::vector<std::string> algorithms_to_run(const PerfOptions& o, const AvailableAlgorithms& available) {
  const bool then_auto = o.algo == "all+auto";
  if (o.algo != "all" && !then_auto) return {o.algo};
  std::vector<std::string> out;
  const auto kind = collective_kind(o.collective);
  if (kind && !o.dtypes.empty()) {
    out = available(*kind, o.dtypes.front());
    for (const DataType dt : o.dtypes) {
      const auto here = available(*kind, dt);
      std::erase_if(out, [&](const std::string& name) { return std::find(here.begin(), here.end(), name) == here.end(); });
    }
  }
  if (then_auto) out.emplace_back();  // none forced: the library's choice, in the same processes
  return out;
}

ParsedOptions parse_perf_options(int argc, char** argv) {
  CLI::App app{
      "nccl-tests-compatible benchmark of strata collectives. Without --ranks it joins the job "
      "described by the environment (strata-run, torchrun, mpirun, srun); with no such "
      "environment it starts 2 local ranks.",
      "strata-perf"};
  // A later option overrides an earlier one, as getopt does for nccl-tests, so a wrapper
  // can put its defaults first and pass its user's flags after them.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  PerfOptions o;
  std::string minb = "32M", maxb = "32M", stepb = "1M", test = "all_reduce", root = "0";
  int ranks = 0;
  app.add_option("-b,--minbytes", minb, "Smallest size (K/M/G suffixes)")->check(size_validator())->capture_default_str();
  app.add_option("-e,--maxbytes", maxb, "Largest size")->check(size_validator())->capture_default_str();
  app.add_option("-i,--stepbytes", stepb, "Fixed increment between sizes")->check(size_validator())->capture_default_str();
  app.add_option("-f,--stepfactor", o.step_factor, "Multiplicative increment (used instead of -i when > 1)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("-n,--iters", o.iters, "Timed iterations per size")->check(CLI::Range(1, 1 << 30))->capture_default_str();
  app.add_option("-w,--warmup_iters", o.warmup_iters, "Untimed iterations before each size")
      ->check(CLI::Range(0, 1 << 30))->capture_default_str();
  app.add_option("-c,--check", o.check, "Correctness-check iterations (0: off, #wrong shows N/A)")
      ->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app.add_option("-o,--op", o.op_arg, "sum, prod, min, max, avg or all")->capture_default_str();
  app.add_option("-d,--datatype", o.dtype_arg,
                 "float, double, half, bfloat16, int8, uint8, int32, int64 or all")->capture_default_str();
  app.add_option("-z,--blocking", o.blocking,
                 "0: issue every iteration then wait; 1: wait and barrier after each; 2: wait after each")
      ->check(CLI::Range(0, 2))->capture_default_str();
  app.add_flag("--median", o.median,
               "Wait after each iteration (as -z 2 unless -z 1) and report the median iteration instead of the mean: "
               "steadier where other work shares the cores, as on one machine emulating regions");
  app.add_option("-r,--root", root, "Root rank of broadcast and reduce, or all")->capture_default_str();
  app.add_option("-t,--test,--collective", test,
                 "all_reduce, reduce_scatter, all_gather, broadcast, reduce, sendrecv (ring neighbours), alltoall or "
                 "barrier (one row, whatever the sizes)")
      ->capture_default_str();
  app.add_option("--ranks", ranks, "Start this many local ranks and run as one job")->check(CLI::Range(1, 4096));
  app.add_option("--regions", o.regions,
                 "With --ranks: give the spawned ranks this many regions (STRATA_REGION), in "
                 "contiguous blocks of rank order")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--servers", o.servers,
                 "With --ranks: also start this many dedicated parameter servers (param_server)")
      ->check(CLI::Range(0, 4096));
  app.add_flag("--interleave", o.interleave, "With --regions: rank r goes to region r % regions");
  app.add_option("--transport", o.transport, "ucx or tcp (default: STRATA_TRANSPORT, else ucx)")
      ->check(CLI::IsMember({"ucx", "tcp"}));
  std::string compress;
  app.add_option("--compress", compress,
                 "Compress every all_reduce across regions with this codec (e.g. topk:0.01+int8); "
                 "the check then reports the result's relative error");
  app.add_option("--algo", o.algo,
                 "Force this registered algorithm on every timed call, or 'all' for one sweep per "
                 "algorithm that implements the collective (applies where the ranks run flat: one "
                 "region), or 'all+auto' for those and then one with the library's choice. Names: " +
                     collectives::algorithm_names());
  app.add_flag("--by-size", o.by_size,
               "With --algo all or all+auto: time every algorithm at one size before the next size "
               "(one row each, under the algorithm's comment line) instead of one sweep per algorithm");
  app.add_option("--json", o.json_path, "Write the results as JSON to this file (rank 0)");
  app.add_option("-T,--timeout", o.timeout_s, "Per-operation timeout in seconds (0: STRATA_TIMEOUT_S)")
      ->check(CLI::NonNegativeNumber);

  try {
    app.parse(argc, argv);
    o.min_bytes = size_of(minb);
    o.max_bytes = size_of(maxb);
    o.step_bytes = size_of(stepb);
    if (ranks > 0) o.ranks = ranks;

    const auto coll = parse_collective(test);
    if (!coll) throw CLI::ValidationError("--test", "unknown collective '" + test + "'");
    o.collective = *coll;

    if (o.dtype_arg == "all") {
      o.dtypes = all_dtypes();
    } else if (const auto dt = parse_dtype(o.dtype_arg)) {
      o.dtypes = {*dt};
    } else {
      throw CLI::ValidationError("--datatype", "unknown data type '" + o.dtype_arg + "'");
    }
    if (o.op_arg == "all") {
      o.ops = all_ops();
    } else if (const auto op = parse_op(o.op_arg)) {
      o.ops = {*op};
      if (reduces(o.collective) && o.dtypes.size() == 1 && !op_supported(*op, o.dtypes[0]))
        throw CLI::ValidationError("--op", o.op_arg + " is only defined for floating types, not " +
                                               o.dtype_arg);
    } else {
      throw CLI::ValidationError("--op", "unknown reduction '" + o.op_arg + "'");
    }

    if (root == "all") {
      o.all_roots = true;
    } else {
      std::size_t used = 0;
      try {
        o.root = std::stoi(root, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != root.size() || o.root < 0)
        throw CLI::ValidationError("--root", "'" + root + "' is neither a rank nor 'all'");
    }

    if (!compress.empty()) {
      try {
        o.compress = Compression::parse(compress);
      } catch (const std::exception& e) {
        throw CLI::ValidationError("--compress", e.what());
      }
      if (o.collective != Collective::all_reduce)
        throw CLI::ValidationError("--compress", "compression applies to all_reduce only");
      if (o.dtypes.size() != 1 || o.dtypes[0] != DataType::f32)
        throw CLI::ValidationError("--compress", "compression needs -d float");
      if (o.ops.size() != 1 || (o.ops[0] != ReduceOp::sum && o.ops[0] != ReduceOp::avg))
        throw CLI::ValidationError("--compress", "compression needs -o sum or -o avg");
      o.compress->key = "strata-perf";
    }
    if (!o.algo.empty()) {
      const auto kind = collective_kind(o.collective);
      if (!kind)
        throw CLI::ValidationError("--algo", std::string(collective_name(o.collective)) + " has no algorithm to choose");
      if (o.compress) throw CLI::ValidationError("--algo", "a compressed all_reduce has its own algorithm");
      if (o.algo != "all" && o.algo != "all+auto" && !collectives::find_algorithm(o.algo))
        throw CLI::ValidationError("--algo", "unknown algorithm '" + o.algo + "' (valid: " +
                                                 collectives::algorithm_names() + ", all, all+auto)");
    }
    if (o.min_bytes > o.max_bytes)
      throw CLI::ValidationError("--minbytes", "minbytes (" + minb + ") is above maxbytes (" + maxb + ")");
    if (o.step_factor > 1 && o.min_bytes == 0)
      throw CLI::ValidationError("--stepfactor", "a step factor needs minbytes above 0");
    if (o.step_factor <= 1 && o.step_bytes == 0)
      throw CLI::ValidationError("--stepbytes", "stepbytes must be above 0");
  } catch (const CLI::ParseError& e) {
    return {std::nullopt, app.exit(e)};
  }
  return {o, 0};
}

}  // namespace strata::perf
