// strata-convergence: trains the same small MLP three times, data-parallel over local
// ranks spread across fake regions, with exact and with compressed gradient allreduce,
// and reports how much the compression costs in final loss.
//
//   strata-convergence                      # 4 ranks, regions us/eu, writes convergence.csv
//   strata-convergence --runs exact,ef --steps 500
//   strata-run -n 8 -- strata-convergence   # join an existing job (set STRATA_REGION yourself)
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "launcher.hpp"
#include "report.hpp"
#include "strata/strata.hpp"
#include "teacher_task.hpp"
#include "training.hpp"

namespace {

using namespace strata;
using namespace strata::convergence;

// Set on the ranks this program starts, so that they train instead of launching again.
constexpr const char* kSpawnedMarker = "STRATA_CONVERGENCE_SPAWNED";

struct Options {
  int ranks = 4;
  int regions = 2;
  TrainConfig train;
  TaskSpec task;
  std::string compression = "topk:0.01+int8";
  std::vector<std::string> runs = {"exact", "ef", "no_ef"};
  std::string csv = "convergence.csv";
  double tail = 0.05;
  double target = 0.02;
};

// Contiguous blocks of ranks per region, each region a single host: the hierarchical
// allreduce then reduces inside a region exactly and compresses only what crosses.
std::string region_name(int rank, int ranks, int regions) {
  static const char* kNames[] = {"us", "eu", "ap", "sa"};
  const int per = (ranks + regions - 1) / regions;
  const int r = std::min(rank / per, regions - 1);
  return r < 4 ? kNames[r] : "region" + std::to_string(r);
}

int spawn_local(const Options& o, int argc, char** argv) {
  tools::LaunchSpec spec;
  spec.nranks = o.ranks;
  spec.argv.push_back(tools::self_executable());
  for (int i = 1; i < argc; ++i) spec.argv.emplace_back(argv[i]);
  spec.all_stdout = false;  // rank 0 reports; the others would repeat it
  spec.name = "strata-convergence";
  spec.extra_env = [o](int rank) {
    tools::EnvList env{{kSpawnedMarker, "1"}};
    if (o.regions > 1) {
      const std::string region = region_name(rank, o.ranks, o.regions);
      env.push_back({"STRATA_REGION", region});
      env.push_back({"STRATA_HOST", region + "-host"});
    }
    return env;
  };
  return tools::launch(spec);
}

std::vector<RunSpec> run_specs(const Options& o) {
  std::vector<RunSpec> specs;
  for (const auto& name : o.runs) {
    RunSpec r;
    if (name == "exact") {
      r.name = "exact";
    } else if (name == "ef" || name == "no_ef") {
      r.compression = Compression::parse(o.compression);
      r.compression->error_feedback = name == "ef";
      r.name = name == "ef" ? "compressed_ef" : "compressed_no_ef";
    } else {
      throw std::invalid_argument("unknown run '" + name + "' (exact, ef, no_ef)");
    }
    specs.push_back(std::move(r));
  }
  return specs;
}

int run_rank(const Options& o) {
  Communicator comm = Communicator::from_env();
  const bool lead = comm.rank() == 0;
  TeacherTask task(o.task);
  const auto specs = run_specs(o);

  bool spans_regions = false;
  for (int r = 1; r < comm.size(); ++r) spans_regions |= comm.locality(r).region != comm.locality(0).region;
  if (lead) {
    const auto floor = task.bayes_floor();
    std::printf("# %d ranks, %s; model %d-%d-%d (%zu parameters); %d steps, global batch %d, lr %g, momentum %g\n",
                comm.size(), spans_regions ? "spanning regions" : "ONE region (compression has no cross-region stage)",
                o.train.shape.inputs, o.train.shape.hidden, o.train.shape.classes,
                Mlp(o.train.shape, 0).parameter_count(), o.train.steps, o.train.global_batch, o.train.lr,
                o.train.momentum);
    std::printf("# task: teacher-labelled Gaussian inputs, %llu training / %llu held-out examples; "
                "teacher's own held-out loss %.4f, accuracy %.4f (the floor)\n",
                static_cast<unsigned long long>(o.task.train_size),
                static_cast<unsigned long long>(o.task.heldout_size), floor.loss, floor.accuracy);
    std::printf("# compression: %s\n", Compression::parse(o.compression).to_string().c_str());
    std::fflush(stdout);
  }

  std::vector<RunResult> results;
  for (const auto& spec : specs) {
    results.push_back(train(comm, task, o.train, spec));
    if (lead) {
      const auto& r = results.back();
      const StepRecord* eval = last_evaluation(r);
      std::printf("# %s done in %.1fs: final loss %.5f, held-out accuracy %.4f\n", r.name.c_str(), r.seconds,
                  final_loss(r, o.tail), eval ? *eval->heldout_accuracy : 0.0);
      std::fflush(stdout);
    }
  }
  if (!lead) return 0;

  std::ofstream csv(o.csv);
  write_csv(csv, results);
  csv.close();
  if (!csv) throw std::runtime_error("cannot write " + o.csv);
  std::ostringstream summary;
  print_summary(summary, results, o.tail, "compressed_ef", o.target);
  std::printf("%s# wrote %s\n", summary.str().c_str(), o.csv.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Data-parallel MLP training through strata: exact vs compressed allreduce"};
  app.add_option("--ranks", o.ranks, "local ranks to start")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--regions", o.regions, "fake regions for the local ranks (contiguous)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--runs", o.runs, "runs, in order; the first is the baseline of the ratios")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--compression", o.compression, "codec of the compressed runs")->capture_default_str();
  app.add_option("--steps", o.train.steps, "SGD steps per run")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", o.train.global_batch, "global batch (split over the ranks)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", o.train.lr, "peak learning rate (warmup, then cosine decay)")->capture_default_str();
  app.add_option("--momentum", o.train.momentum)->capture_default_str();
  app.add_option("--hidden", o.train.shape.hidden, "hidden units")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--inputs", o.task.inputs, "input features")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--sharpness", o.task.sharpness, "teacher logit scale (higher: less label noise)")
      ->capture_default_str();
  app.add_option("--train-size", o.task.train_size, "training examples")->capture_default_str();
  app.add_option("--seed", o.task.seed, "data seed (the model seed follows it)")->capture_default_str();
  app.add_option("--eval-every", o.train.eval_every, "steps between held-out evaluations")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--tail", o.tail, "fraction of final steps averaged into the final loss")->capture_default_str();
  app.add_option("--csv", o.csv, "per-step output")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  o.train.shape.inputs = o.task.inputs;
  o.train.shape.classes = o.task.classes;
  o.train.init_seed = o.task.seed + 1;

  try {
    // Bad arguments are reported once, here, rather than by every rank.
    run_specs(o);
    if (!tools::env_set(kSpawnedMarker) && !tools::launched_externally()) {
      if (o.train.global_batch % o.ranks != 0)
        throw std::invalid_argument("--batch " + std::to_string(o.train.global_batch) +
                                    " does not split evenly over " + std::to_string(o.ranks) + " ranks");
      return spawn_local(o, argc, argv);
    }
    return run_rank(o);
  } catch (const std::exception& e) {
    const char* rank = std::getenv("STRATA_RANK");
    std::fprintf(stderr, "strata-convergence%s%s: %s\n", rank ? ": rank " : "", rank ? rank : "", e.what());
    return 1;
  }
}
