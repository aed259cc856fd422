// Ranks that end a job at different times: each destroys its communicator as soon as its
// own part of the last collective is done, while peers in other regions may still be
// finishing theirs over the emulated WAN. A completed job must never turn into a failure
// on the way out (a peer's goodbye overtaking its last data or acknowledgements).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

constexpr int kRanks = 8;
constexpr int kRegions = 4;

struct Ending {
  const char* streams = "4";
  int jobs = 6;  // each a fresh communicator: the race happens once per job end
};

// A short job: a few allreduces of odd sizes, then the small allgather a tool ends with,
// every result checked; the communicator is destroyed the moment the allgather returns.
void one_job(int rank, const std::string& root, int job) {
  Communicator comm(rank, kRanks, root);
  const auto value = [&](int r, std::size_t i) {
    return static_cast<std::int64_t>((i * 7919 + static_cast<std::size_t>(r * 104729 + job)) % 100003);
  };
  for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1000 + kRanks}}) {
    std::vector<std::int64_t> buf(n);
    for (std::size_t i = 0; i < n; ++i) buf[i] = value(rank, i);
    comm.allreduce(buf.data(), buf.data(), n, DataType::i64, ReduceOp::sum).wait();
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t want = 0;
      for (int r = 0; r < kRanks; ++r) want += value(r, i);
      require(buf[i] == want, "job " + std::to_string(job) + ": allreduce of " + std::to_string(n) +
                                  " gave " + std::to_string(buf[i]) + " at " + std::to_string(i) +
                                  ", expected " + std::to_string(want));
    }
  }
  const std::int64_t mine[2] = {rank, 1000 + job};
  std::vector<std::int64_t> all(2 * kRanks, -1);
  comm.allgather(mine, all.data(), 2, DataType::i64).wait();
  for (int r = 0; r < kRanks; ++r)
    require(all[2 * r] == r && all[2 * r + 1] == 1000 + job,
            "job " + std::to_string(job) + ": allgather slot " + std::to_string(r) + " is wrong");
}

void run_endings(const Ending& e) {
  std::vector<std::string> roots;
  for (int j = 0; j < e.jobs; ++j) roots.push_back(free_root_address());
  auto results = fork_ranks(kRanks, std::chrono::seconds(200), [&](int rank) {
    const int per = kRanks / kRegions;
    const std::string region = "region" + std::to_string(rank / per);
    ::setenv("STRATA_REGION", region.c_str(), 1);
    ::setenv("STRATA_HOST", (region + "-host").c_str(), 1);
    ::setenv("STRATA_WAN_EMULATE", "delay=10ms", 1);
    ::setenv("STRATA_WAN_STREAMS", e.streams, 1);
    ::setenv("STRATA_TIMEOUT_S", "30", 1);
    for (int j = 0; j < e.jobs; ++j) one_job(rank, roots[static_cast<std::size_t>(j)], j);
  });
  EXPECT_EQ(failures(results), "");
}

TEST(JobEnd, FourRegionsEndingAtOnceNeverFail) { run_endings({}); }
TEST(JobEnd, MoreStreamsThanMessagesNeverFail) { run_endings({.streams = "8"}); }

}  // namespace
}  // namespace strata::test
