// strata-nccl-perf: an nccl-tests-style sweep on real NCCL, for the GPU machine's check
// (scripts/device/check.sh). It starts --ranks local processes on one GPU, each with an
// NCCL_HOSTID of its own so that NCCL takes them for separate hosts and moves every byte
// through its network (NCCL_NET_PLUGIN=strata, or NCCL's own Socket), in --regions
// contiguous STRATA_REGIONs; every result is compared with an exact reference.
//
//   strata-nccl-perf --ranks 2 --regions 2 -t all -b 8 -e 256M -f 4 --json out.json
//
// Exit status: 0, 1 when a result was wrong, 2 on an error, 77 when there is no CUDA
// device (CTest's skip), 124 when --job-timeout ran out.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "launcher.hpp"
#include "nccl_rank.hpp"
#include "perf_report.hpp"

namespace {

using namespace strata;
using namespace strata::gpu_check;

constexpr const char* kSpawnedMarker = "STRATA_NCCL_PERF_SPAWNED";
constexpr int kSkipped = 77;

std::uint64_t size_arg(const std::string& text, const char* flag) {
  const auto v = perf::parse_size(text);
  if (!v) throw CLI::ValidationError(flag, "'" + text + "' is not a size (digits with K, M or G)");
  return *v;
}

std::string id_path() {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/strata-nccl-" +
         std::getenv("STRATA_RUN_ID") + ".id";
}

}  // namespace

int main(int argc, char** argv) {
  SweepOptions o;
  int ranks = 2, regions = 1;
  double job_timeout_s = 600;
  std::string colls = "all_reduce", min_b = "8", max_b = "32M", scale = "4M";
  CLI::App app{"strata-nccl-perf: nccl-tests-style sweep on real NCCL, ranks on one GPU as separate hosts"};
  app.add_option("--ranks", ranks, "local ranks to start")->check(CLI::Range(1, 64));
  app.add_option("--regions", regions, "contiguous STRATA_REGIONs the ranks are split into")->check(CLI::Range(1, 64));
  app.add_option("-t,--collectives", colls, "all_reduce, all_gather, reduce_scatter, broadcast, sendrecv, comma-separated, or all");
  app.add_option("-b,--minbytes", min_b, "smallest size");
  app.add_option("-e,--maxbytes", max_b, "largest size");
  app.add_option("-f,--stepfactor", o.step_factor, "size multiplier")->check(CLI::Range(2, 1024));
  app.add_option("-n,--iters", o.iters, "timed calls per row")->check(CLI::Range(1, 100000));
  app.add_option("-w,--warmup_iters", o.warmup, "untimed calls first")->check(CLI::Range(0, 100000));
  app.add_option("--scale-bytes", scale, "above this size, fewer timed calls in proportion (0: never)");
  app.add_option("-d,--device", o.device, "CUDA device every rank uses")->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", o.timeout_s, "seconds one call (or NCCL's init) may take")->check(CLI::PositiveNumber);
  app.add_option("--job-timeout", job_timeout_s, "seconds the whole run may take")->check(CLI::PositiveNumber);
  app.add_option("--label", o.label, "names the run (e.g. the network) in the header and the JSON");
  app.add_option("--json", o.json_path, "write the results here (one document per collective)");
  try {
    app.parse(argc, argv);
    o.colls = parse_coll_list(colls);
    o.min_bytes = size_arg(min_b, "-b");
    o.max_bytes = size_arg(max_b, "-e");
    o.scale_bytes = size_arg(scale, "--scale-bytes");
    if (o.min_bytes > o.max_bytes) throw CLI::ValidationError("-b", "is larger than -e");
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "strata-nccl-perf: %s\n", e.what());
    return 2;
  }
  if (o.label.empty()) o.label = std::getenv("NCCL_NET") != nullptr ? std::getenv("NCCL_NET") : "default";

  if (tools::env_set(kSpawnedMarker))
    return run_nccl_rank(o, std::atoi(std::getenv("STRATA_RANK")), std::atoi(std::getenv("STRATA_WORLD_SIZE")), id_path());

  std::string why;
  if (!cuda_device_present(why)) {
    std::printf("strata-nccl-perf: skipped: %s\n", why.c_str());
    return kSkipped;
  }
  tools::LaunchSpec spec;
  spec.nranks = ranks;
  spec.argv.push_back(tools::self_executable());
  for (int i = 1; i < argc; ++i) spec.argv.emplace_back(argv[i]);
  spec.all_stdout = false;  // rank 0 prints the table
  spec.timeout = std::chrono::milliseconds(static_cast<long long>(job_timeout_s * 1000));
  spec.name = "strata-nccl-perf";
  spec.extra_env = [ranks, regions](int rank) {
    const int per = (ranks + regions - 1) / regions;
    tools::EnvList env{{kSpawnedMarker, "1"}, {"NCCL_HOSTID", "strata-host" + std::to_string(rank)}};
    if (regions > 1) env.push_back({"STRATA_REGION", "region" + std::to_string(std::min(rank / per, regions - 1))});
    return env;
  };
  return tools::launch(spec);
}
