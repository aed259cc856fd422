// strata-run: start N local ranks of a command, wired to rendezvous with each other.
//
//   strata-run -n 4 -- python train.py --epochs 3
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "launcher.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Runs N copies of a command on this machine as the ranks of one strata job. Each rank "
      "gets STRATA_RANK, STRATA_WORLD_SIZE, STRATA_LOCAL_RANK, STRATA_LOCAL_SIZE, STRATA_ROOT "
      "and STRATA_RUN_ID. If a rank fails the others are stopped and its exit status is "
      "returned; a timeout returns 124.",
      "strata-run"};
  int nranks = 0;
  int nservers = 0;
  double timeout_s = 0;
  bool tag_output = false;
  bool rank0_stdout = false;
  std::vector<std::string> command;
  app.add_option("-n,--ranks,--np", nranks, "Number of ranks")->required()->check(CLI::Range(1, 4096));
  app.add_option("--servers", nservers,
                 "Also start this many dedicated parameter servers (the same command with STRATA_ROLE=server)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--timeout", timeout_s, "Stop every rank after this many seconds and exit 124 (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--tag-output", tag_output, "Prefix every output line with \"[rank N] \"");
  app.add_flag("--rank0-stdout", rank0_stdout,
               "Show only rank 0's standard output (every rank's standard error is still shown)");
  app.add_option("command", command, "The command and its arguments (after --)")->required();
  // Everything from the command's name on belongs to the command, dashes included.
  app.prefix_command();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& extra : app.remaining()) command.push_back(extra);

  strata::tools::LaunchSpec spec;
  spec.nranks = nranks;
  spec.nservers = nservers;
  spec.argv = command;
  spec.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000.0));
  spec.tag_output = tag_output;
  spec.all_stdout = !rank0_stdout;
  spec.name = "strata-run";
  try {
    return strata::tools::launch(spec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-run: %s\n", e.what());
    return 1;
  }
}
