// Local multi-rank launcher shared by strata-run and strata-perf --ranks: starts N copies
// of a command on this machine, wired to rendezvous with each other, and supervises them
// like mpirun does (one failure or a timeout brings the whole job down).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace strata::tools {

using EnvList = std::vector<std::pair<std::string, std::string>>;

struct LaunchSpec {
  int nranks = 1;
  // Dedicated parameter servers: further copies of the command with STRATA_ROLE=server,
  // STRATA_RANK = their index, STRATA_WORLD_SIZE = nranks; every process also gets
  // STRATA_SERVERS. They end by themselves once the ranks close their communicators.
  int nservers = 0;
  // argv[0] is looked up in PATH unless it contains a '/'.
  std::vector<std::string> argv;
  // Zero means no limit. When it expires every rank is stopped and launch returns 124.
  std::chrono::milliseconds timeout{0};
  // How long stopped ranks get between SIGTERM and SIGKILL.
  std::chrono::milliseconds kill_grace{2000};
  // Prefix every forwarded line with "[rank N] ".
  bool tag_output = false;
  // false: only rank 0's stdout is shown (so a result table stays clean); stderr of every
  // rank is always shown.
  bool all_stdout = true;
  // Extra variables for one rank, set after (and so able to override) the STRATA_* ones;
  // this is where a caller assigns STRATA_REGION and the like per rank.
  std::function<EnvList(int rank)> extra_env;
  // Name used in the launcher's own messages on stderr.
  std::string name = "strata-run";
};

// Exit status that launch() uses for a timeout, as timeout(1) does.
inline constexpr int kTimeoutExitCode = 124;

// Runs spec.nranks copies of spec.argv, each with STRATA_RANK, STRATA_WORLD_SIZE,
// STRATA_LOCAL_RANK, STRATA_LOCAL_SIZE, STRATA_ROOT (127.0.0.1 and a free port, served
// by rank 0) and STRATA_RUN_ID (unique per launch). Returns 0 when every rank exits 0;
// otherwise the status of the first rank that failed (128 + signal number when it was
// killed by a signal), 124 on timeout, or 128 + signal when the launcher itself got
// SIGINT/SIGTERM/SIGHUP (which it forwards to the ranks). Throws std::system_error when
// it cannot start the ranks at all.
int launch(const LaunchSpec& spec);

// "127.0.0.1:<port>" of a TCP port that was free a moment ago.
std::string free_local_address();

// A string unique to this launch and safe in file names: pid, time and a counter.
std::string make_run_id();

// The absolute path of the running executable, for re-executing it as a rank.
std::string self_executable();

// Whether the variable is set to something non-empty.
bool env_set(const char* name);
// Whether a launcher Communicator::from_env recognises already started this process as a
// rank (strata-run, torchrun, mpirun, srun): tools then run as that rank instead of
// spawning local ones.
bool launched_externally();

}  // namespace strata::tools
