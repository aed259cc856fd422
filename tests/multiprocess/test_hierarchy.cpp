// Multi-region layouts on one machine (localities faked per rank through STRATA_REGION
// and STRATA_HOST): every collective against the reference, with the hierarchical
// allreduce selected wherever the layout allows it.
#include <gtest/gtest.h>

#include <cstdlib>

#include "collective_check.hpp"
#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

struct Place {
  const char* region;
  const char* host;
};

void run_layout(const std::vector<Place>& places, TransportKind t, const char* algo, bool all_collectives,
                const char* wan_emulate = "") {
  const int n = static_cast<int>(places.size());
  const std::string root = free_root_address();
  auto results = fork_ranks(n, std::chrono::seconds(240), [&](int rank) {
    ::setenv("STRATA_REGION", places[rank].region, 1);
    ::setenv("STRATA_HOST", places[rank].host, 1);
    ::setenv("STRATA_ALGO", algo, 1);
    ::setenv("STRATA_WAN_EMULATE", wan_emulate, 1);
    ::setenv("STRATA_TIMEOUT_S", "60", 1);
    CommOptions o;
    o.transport = t;
    Communicator comm(rank, n, root, o);
    run_all(comm, all_collectives ? cases(n, false) : allreduce_cases(n, true));
  });
  EXPECT_EQ(failures(results), "");
}

const std::vector<Place> k2x2x2 = {{"us", "u0"}, {"us", "u0"}, {"us", "u1"}, {"us", "u1"},
                                   {"eu", "e0"}, {"eu", "e0"}, {"eu", "e1"}, {"eu", "e1"}};
const std::vector<Place> kInterleaved = {{"us", "u0"}, {"eu", "e0"}, {"us", "u1"}, {"eu", "e1"}};
const std::vector<Place> kUneven3 = {{"us", "u0"}, {"us", "u0"}, {"us", "u1"},
                                     {"eu", "e0"}, {"ap", "a0"}, {"ap", "a1"}};

TEST(Hierarchy, TwoRegionsTwoHostsTwoRanksAllreduce) { run_layout(k2x2x2, TransportKind::tcp, "hier", false); }
TEST(Hierarchy, TwoRegionsTwoHostsTwoRanksEveryCollectiveUcx) { run_layout(k2x2x2, TransportKind::ucx, "auto", true); }
TEST(Hierarchy, RanksInterleavedAcrossRegions) { run_layout(kInterleaved, TransportKind::tcp, "hier", true); }
TEST(Hierarchy, ThreeUnevenRegionsFallBackToFlat) { run_layout(kUneven3, TransportKind::tcp, "auto", true); }

// A WAN stream cut mid-collective (after 5 frames, and then 1% of frames at random) is
// reconnected and resent; the results still match the reference bit for bit.
TEST(Hierarchy, CutWanStreamsStillGiveExactResults) {
  run_layout(k2x2x2, TransportKind::tcp, "hier", false, "cut=5,loss=0.01");
}

TEST(Hierarchy, ForcingItOnAnUnevenLayoutIsAClearError) {
  const std::string root = free_root_address();
  auto results = fork_ranks(static_cast<int>(kUneven3.size()), std::chrono::seconds(60), [&](int rank) {
    ::setenv("STRATA_REGION", kUneven3[rank].region, 1);
    ::setenv("STRATA_HOST", kUneven3[rank].host, 1);
    ::setenv("STRATA_ALGO", "hier", 1);
    ::setenv("STRATA_TIMEOUT_S", "10", 1);
    try {
      Communicator comm(rank, static_cast<int>(kUneven3.size()), root);
    } catch (const InvalidArgument& e) {
      require(std::string(e.what()).find("STRATA_ALGO=hier needs") != std::string::npos, e.what());
      return;
    } catch (const Error&) {
      return;  // a peer that failed first may leave this rank a rendezvous error instead
    }
    throw std::runtime_error("expected STRATA_ALGO=hier to be refused");
  });
  EXPECT_EQ(failures(results), "");
}

}  // namespace
}  // namespace strata::test
