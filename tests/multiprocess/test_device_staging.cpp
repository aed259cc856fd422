// Collectives on device buffers as the GPU path stages them (core/device_call.hpp), run
// on emulated device memory (device::emulate: host memory the library takes for a
// device's), so that the staging, its copies and the plans under it are checked here
// as on a GPU: every collective against the reference, flat and across regions.
#include <gtest/gtest.h>

#include <cstdlib>

#include "collective_check.hpp"
#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

void run_on_device(int n, int regions, const char* algo) {
  const std::string root = free_root_address();
  auto results = fork_ranks(n, std::chrono::seconds(240), [&](int rank) {
    const int per_region = n / regions;
    ::setenv("STRATA_REGION", ("r" + std::to_string(rank / per_region)).c_str(), 1);
    ::setenv("STRATA_HOST", ("h" + std::to_string(rank)).c_str(), 1);
    ::setenv("STRATA_ALGO", algo, 1);
    ::setenv("STRATA_SEGMENT_BYTES", "16384", 1);
    ::setenv("STRATA_TIMEOUT_S", "60", 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    Communicator comm(rank, n, root, o);
    run_all(comm, cases(n, false), {}, Memory::emulated_device);
  });
  EXPECT_EQ(failures(results), "");
}

TEST(DeviceStaging, EveryCollectiveFourRanksTwoRegions) { run_on_device(4, 2, "hier"); }
TEST(DeviceStaging, EveryCollectiveThreeRanksFlat) { run_on_device(3, 1, "auto"); }

}  // namespace
}  // namespace strata::test
