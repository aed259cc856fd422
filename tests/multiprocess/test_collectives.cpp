// Every collective x dtype x op x size (0, 1, odd, non-divisible, large), in and out of
// place, on N = 1..5 forked ranks over each transport, against a reference computed
// from every rank's inputs. Each rank also checks that all ranks got identical bits.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fork_ranks.hpp"
#include "collective_check.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

struct Param {
  TransportKind transport;
  int ranks;
  bool ring_only;  // force ring/chain with tiny chunks: exercises the pipeline everywhere
};

class Collectives : public ::testing::TestWithParam<Param> {};

TEST_P(Collectives, MatchReference) {
  const auto prm = GetParam();
  const std::string root = free_root_address();
  auto results = fork_ranks(prm.ranks, std::chrono::seconds(240), [&](int rank) {
    if (prm.ring_only) {
      ::setenv("STRATA_SMALL_BYTES", "0", 1);
      ::setenv("STRATA_CHUNK_BYTES", "4096", 1);
    }
    ::setenv("STRATA_TIMEOUT_S", "60", 1);
    CommOptions opts;
    opts.transport = prm.transport;
    Communicator comm(rank, prm.ranks, root, opts);
    run_all(comm, cases(prm.ranks, !prm.ring_only));
    p2p_and_barrier(comm);
  });
  EXPECT_EQ(failures(results), "");
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (auto t : {TransportKind::tcp, TransportKind::ucx})
    for (int n = 1; n <= 5; ++n)
      for (bool ring : {false, true}) out.push_back({t, n, ring});
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllTransports, Collectives, ::testing::ValuesIn(params()),
                         [](const auto& info) {
                           return std::string(to_string(info.param.transport)) + "_" +
                                  std::to_string(info.param.ranks) + "ranks" +
                                  (info.param.ring_only ? "_ring" : "");
                         });

}  // namespace
}  // namespace strata::test
