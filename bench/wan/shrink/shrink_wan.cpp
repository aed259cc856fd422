// strata-wan-shrink: how long survivors take to go on after a rank dies, across the lab.
//
// Every rank (from the environment, as strata-run or run_allreduce.sh start them) runs
// small allreduces; rank --victim ends itself abruptly (SIGKILL) before call --at. The
// survivors meet the PeerLostError, shrink to the ranks left and run one more call, and
// rank 0 of the survivors prints, in seconds: from the loss being named to the shrunk
// communicator, from there to its first result, and the creation of the first
// communicator for comparison (what probing a slow WAN costs once).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <strata/strata.hpp>

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == name) return std::atoi(argv[i + 1]);
  return fallback;
}

// Every rank contributes rank+1 to each element: the sum is known whatever the members.
bool exact(const std::vector<float>& v, float want) {
  for (float x : v)
    if (x != want) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int victim = arg(argc, argv, "--victim", 1), at = arg(argc, argv, "--at", 5);
  const int count = arg(argc, argv, "--count", 256);
  try {
    const auto t_create = Clock::now();
    auto comm = strata::Communicator::from_env();
    const double created = since(t_create);
    const int me = comm.rank(), n = comm.size();
    std::vector<float> buf(static_cast<std::size_t>(count));
    float want = float(n) * float(n + 1) / 2;
    for (int i = 0;; ++i) {
      if (me == victim && i == at) ::kill(::getpid(), SIGKILL);
      std::fill(buf.begin(), buf.end(), float(me + 1));
      try {
        comm.allreduce(buf.data(), buf.data(), buf.size(), strata::DataType::f32, strata::ReduceOp::sum).wait();
      } catch (const strata::PeerLostError& e) {
        const auto t_lost = Clock::now();
        const auto lost = e.lost_ranks();
        auto smaller = comm.shrink(lost);
        const double shrunk = since(t_lost);
        const auto t_call = Clock::now();
        // The survivors keep their old rank's contribution: the sum of those left.
        std::fill(buf.begin(), buf.end(), float(me + 1));
        smaller.allreduce(buf.data(), buf.data(), buf.size(), strata::DataType::f32, strata::ReduceOp::sum).wait();
        const double called = since(t_call);
        float left = want;
        for (int r : lost) left -= float(r + 1);
        if (!exact(buf, left)) {
          std::fprintf(stderr, "rank %d: wrong result after the shrink\n", me);
          return 1;
        }
        if (smaller.rank() == 0)
          std::printf("# SHRINK lost=%d survivors=%d creation=%.3f s shrink=%.3f s next_call=%.3f s "
                      "loss_to_result=%.3f s\n",
                      lost.empty() ? -1 : lost.front(), smaller.size(), created, shrunk, called, shrunk + called);
        return 0;
      }
      if (!exact(buf, want)) {
        std::fprintf(stderr, "rank %d: wrong result at call %d\n", me, i);
        return 1;
      }
      if (i > at + 1000) {
        std::fprintf(stderr, "rank %d: the victim never died\n", me);
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank ?: %s\n", e.what());
    return 1;
  }
}
