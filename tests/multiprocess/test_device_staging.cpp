// Collectives on device buffers as the GPU path runs them (core/device_call.hpp), on
// emulated device memory (device::emulate: host memory the library takes for a
// device's), so that the staging, its copies, the device plan's segments and its engines
// (the host engine standing in for NCCL inside a region) are checked here as on a GPU:
// every collective against the reference, flat and across regions.
#include <gtest/gtest.h>

#include <cstdlib>

#include "collective_check.hpp"
#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

// n ranks in `regions` regions of `hosts` hosts each (ranks in order).
void run_on_device(int n, int regions, const char* algo, int hosts = 0, bool large = false) {
  const std::string root = free_root_address();
  auto results = fork_ranks(n, std::chrono::seconds(240), [&](int rank) {
    const int per_region = n / regions;
    const int per_host = hosts ? per_region / hosts : 1;
    ::setenv("STRATA_REGION", ("r" + std::to_string(rank / per_region)).c_str(), 1);
    ::setenv("STRATA_HOST", ("h" + std::to_string(rank / per_host)).c_str(), 1);
    ::setenv("STRATA_ALGO", algo, 1);
    ::setenv("STRATA_SEGMENT_BYTES", "16384", 1);
    ::setenv("STRATA_TIMEOUT_S", "60", 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    Communicator comm(rank, n, root, o);
    run_all(comm, cases(n, large), {}, Memory::emulated_device);
  });
  EXPECT_EQ(failures(results), "");
}

TEST(DeviceStaging, EveryCollectiveFourRanksTwoRegions) { run_on_device(4, 2, "hier"); }
TEST(DeviceStaging, EveryCollectiveThreeRanksFlat) { run_on_device(3, 1, "auto"); }
// Three levels (host, region, WAN), large cases: allreduce takes the device plan with
// several segments' staged WAN stages in flight.
TEST(DeviceStaging, EveryCollectiveTwoRegionsTwoHostsTwoRanks) { run_on_device(8, 2, "hier", 2, true); }

}  // namespace
}  // namespace strata::test
