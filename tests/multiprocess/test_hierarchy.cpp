// Multi-region layouts on one machine (localities faked per rank through STRATA_REGION
// and STRATA_HOST): every collective against the reference, with the hierarchical
// plans (split rail on uniform layouts, leaders on uneven ones) forced or automatic.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "collective_check.hpp"
#include "comm_setup.hpp"
#include "fork_ranks.hpp"
#include "strata/strata.hpp"
#include "temp_dir.hpp"

namespace strata::test {
namespace {

struct Place {
  const char* region;
  const char* host;
};

struct Run {
  TransportKind transport = TransportKind::tcp;
  const char* algo = "hier";
  bool all_collectives = true;
  bool large = false;
  const char* wan_emulate = "";
  // Small segments make the pipelined allreduce keep several segments in flight even
  // at test sizes.
  const char* segment_bytes = "16384";
  std::string topo_file;  // STRATA_TOPO_FILE; when set, rank 0 also checks the region ring
  std::vector<std::string> ring;  // the order the top level must cross regions in
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

void run_layout(const std::vector<Place>& places, const Run& run) {
  const int n = static_cast<int>(places.size());
  const std::string root = free_root_address(), ring_root = free_root_address();
  auto results = fork_ranks(n, std::chrono::seconds(240), [&](int rank) {
    ::setenv("STRATA_REGION", places[rank].region, 1);
    ::setenv("STRATA_HOST", places[rank].host, 1);
    ::setenv("STRATA_ALGO", run.algo, 1);
    ::setenv("STRATA_WAN_EMULATE", run.wan_emulate, 1);
    ::setenv("STRATA_SEGMENT_BYTES", run.segment_bytes, 1);
    ::setenv("STRATA_TIMEOUT_S", "60", 1);
    if (!run.topo_file.empty()) {
      ::setenv("STRATA_TOPO_FILE", run.topo_file.c_str(), 1);
      detail::CommImpl c(comm_setup(rank, n, ring_root));
      require(c.plan() && c.plan()->region_ring && c.plan()->region_ring->order == run.ring,
              "rank " + std::to_string(rank) + ": the top level does not cross regions in the expected order (" +
                  (c.plan() ? c.plan()->describe() : std::string("no plan")) + ")");
    }
    CommOptions o;
    o.transport = run.transport;
    Communicator comm(rank, n, root, o);
    run_all(comm, run.all_collectives ? cases(n, run.large) : allreduce_cases(n, run.large));
    if (run.all_collectives) check_any_source(comm);  // messages from other regions over the WAN link
    check_barrier(comm);
  });
  EXPECT_EQ(failures(results), "");
}

const std::vector<Place> k2x2x2 = {{"us", "u0"}, {"us", "u0"}, {"us", "u1"}, {"us", "u1"},
                                   {"eu", "e0"}, {"eu", "e0"}, {"eu", "e1"}, {"eu", "e1"}};
const std::vector<Place> k3x1x2 = {{"us", "u0"}, {"us", "u0"}, {"eu", "e0"},
                                   {"eu", "e0"}, {"ap", "a0"}, {"ap", "a0"}};
const std::vector<Place> kInterleaved = {{"us", "u0"}, {"eu", "e0"}, {"us", "u1"}, {"eu", "e1"}};
// A region with more hosts than the others, and hosts with different rank counts.
const std::vector<Place> kUneven3 = {{"us", "u0"}, {"us", "u0"}, {"us", "u1"},
                                     {"eu", "e0"}, {"ap", "a0"}, {"ap", "a1"}};
const std::vector<Place> kUnevenHosts = {{"us", "u0"}, {"eu", "e0"}, {"us", "u0"},
                                         {"us", "u1"}, {"eu", "e0"}, {"us", "u0"}};
const std::vector<Place> kOneRegion = {{"us", "u0"}, {"us", "u0"}, {"us", "u1"}, {"us", "u1"}};

TEST(Hierarchy, TwoRegionsTwoHostsTwoRanksEveryCollective) { run_layout(k2x2x2, {.large = true}); }
TEST(Hierarchy, TwoRegionsTwoHostsTwoRanksEveryCollectiveUcx) {
  run_layout(k2x2x2, {.transport = TransportKind::ucx, .algo = "auto"});
}
TEST(Hierarchy, OneMegabyteSegmentsAllreduce) {
  run_layout(k2x2x2, {.all_collectives = false, .large = true, .segment_bytes = "1048576"});
}
TEST(Hierarchy, ThreeRegionsEveryCollective) { run_layout(k3x1x2, {}); }
TEST(Hierarchy, RanksInterleavedAcrossRegions) { run_layout(kInterleaved, {}); }
TEST(Hierarchy, ThreeUnevenRegionsUseTheLeaderPlan) { run_layout(kUneven3, {.large = true}); }
TEST(Hierarchy, UnevenHostsInterleavedUseTheLeaderPlan) { run_layout(kUnevenHosts, {.algo = "auto"}); }
TEST(Hierarchy, OneRegionRunsFlat) { run_layout(kOneRegion, {.algo = "auto"}); }

// Four regions where one pair (r0-r1) has a quarter of the others' bandwidth: the top
// level crosses them in the order that avoids that pair, on the split-rail plan and on the
// leader plan, and every collective still matches the reference.
const char* const kSlowPairMatrix =
    "wan { from_region: \"r0\" to_region: \"r1\" latency_ms: 25 bandwidth_mbps: 50 }\n"
    "wan { from_region: \"r0\" to_region: \"r2\" latency_ms: 25 bandwidth_mbps: 200 }\n"
    "wan { from_region: \"r0\" to_region: \"r3\" latency_ms: 25 bandwidth_mbps: 200 }\n"
    "wan { from_region: \"r1\" to_region: \"r2\" latency_ms: 25 bandwidth_mbps: 200 }\n"
    "wan { from_region: \"r1\" to_region: \"r3\" latency_ms: 25 bandwidth_mbps: 200 }\n"
    "wan { from_region: \"r2\" to_region: \"r3\" latency_ms: 25 bandwidth_mbps: 200 }\n";
const std::vector<Place> k4x1x2 = {{"r0", "h0"}, {"r0", "h0"}, {"r1", "h1"}, {"r1", "h1"},
                                   {"r2", "h2"}, {"r2", "h2"}, {"r3", "h3"}, {"r3", "h3"}};
const std::vector<Place> kUneven4 = {{"r0", "h0"}, {"r0", "h0"}, {"r0", "h4"}, {"r1", "h1"}, {"r2", "h2"}, {"r3", "h3"}};

TEST(Hierarchy, RegionRingAvoidsASlowPair) {
  TempDir dir("strata-ring");
  const std::string topo = dir.path() + "/slow-pair.textproto";
  write_file(topo, kSlowPairMatrix);
  const std::vector<std::string> ring{"r0", "r2", "r1", "r3"};
  run_layout(k4x1x2, {.topo_file = topo, .ring = ring});
  run_layout(kUneven4, {.topo_file = topo, .ring = ring});
}

// A WAN stream cut mid-collective (after 5 frames, and then 1% of frames at random) is
// reconnected and resent; the results still match the reference bit for bit.
TEST(Hierarchy, CutWanStreamsStillGiveExactResults) {
  run_layout(k2x2x2, {.all_collectives = false, .large = true, .wan_emulate = "cut=5,loss=0.01"});
}

TEST(Hierarchy, ForcingItOnOneRegionIsAClearError) {
  const std::string root = free_root_address();
  auto results = fork_ranks(static_cast<int>(kOneRegion.size()), std::chrono::seconds(60), [&](int rank) {
    ::setenv("STRATA_REGION", kOneRegion[rank].region, 1);
    ::setenv("STRATA_HOST", kOneRegion[rank].host, 1);
    ::setenv("STRATA_ALGO", "hier", 1);
    ::setenv("STRATA_TIMEOUT_S", "10", 1);
    try {
      Communicator comm(rank, static_cast<int>(kOneRegion.size()), root);
    } catch (const InvalidArgument& e) {
      require(std::string(e.what()).find("STRATA_ALGO=hier needs ranks in several regions") != std::string::npos,
              e.what());
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
