// Collectives on device buffers as the GPU path runs them (core/device_call.hpp), on
// emulated device memory (device::emulate: host memory the library takes for a
// device's), so that the staging, its copies, the device plan's segments and its engines
// (the host engine standing in for NCCL inside a region) are checked here as on a GPU:
// every collective against the reference, flat and across regions.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "collective_check.hpp"
#include "device/memory.hpp"
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

// NCCL needs every rank: device buffers on one rank and host buffers on another fail the
// call on both with a MismatchError that says so, rather than leave one waiting in NCCL.
TEST(DeviceStaging, DeviceBuffersOnOneRankAndHostOnAnotherAreAMismatch) {
  const std::string root = free_root_address();
  auto results = fork_ranks(2, std::chrono::seconds(60), [&](int rank) {
    ::setenv("STRATA_TIMEOUT_S", "20", 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    Communicator comm(rank, 2, root, o);
    std::vector<float> v(1000, 1.f);
    if (rank == 0) device::emulate(v.data(), v.size() * sizeof(float));
    std::string what = "no error";
    try {
      comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum).wait();
    } catch (const MismatchError& e) {
      what = e.what();
    } catch (const Error& e) {
      what = std::string("not a MismatchError: ") + e.what();
    }
    require(what.find("buffers must be of one kind on every rank") != std::string::npos, what);
  });
  EXPECT_EQ(failures(results), "");
}

// Only the shard leaves the device: each rank copies to the host and back only its range
// of the region level (1/4 of each segment: a piece per rank of its region), so over all
// ranks each byte of the vector once per region.
TEST(DeviceStaging, OnlyTheShardIsCopiedToTheHost) {
  const int n = 8;
  const std::size_t count = 1'000'003;
  const std::string root = free_root_address();
  auto results = fork_ranks(n, std::chrono::seconds(120), [&](int rank) {
    ::setenv("STRATA_REGION", rank < 4 ? "r0" : "r1", 1);
    ::setenv("STRATA_HOST", ("h" + std::to_string(rank / 2)).c_str(), 1);
    ::setenv("STRATA_ALGO", "hier", 1);
    ::setenv("STRATA_SEGMENT_BYTES", "262144", 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    Communicator comm(rank, n, root, o);
    std::vector<float> v(count, static_cast<float>(rank + 1));
    device::emulate(v.data(), v.size() * sizeof(float));
    comm.allreduce(v.data(), v.data(), count, DataType::f32, ReduceOp::sum).wait();
    device::forget(v.data());
    for (std::size_t i = 0; i < count; ++i)
      require(v[i] == 36.f, "element " + std::to_string(i) + " is " + std::to_string(v[i]));
    const auto t = comm.traffic();
    require(t.device_to_host_bytes == t.host_to_device_bytes, "copied out and back differ");
    require(t.device_to_host_bytes <= (count / 4 + 64) * sizeof(float),
            "rank " + std::to_string(rank) + " copied " + std::to_string(t.device_to_host_bytes) + " bytes out");
    std::uint64_t mine = t.device_to_host_bytes, all = 0;
    comm.allreduce(&mine, &all, 1, DataType::i64, ReduceOp::sum).wait();
    require(all == 2 * count * sizeof(float), "the ranks copied " + std::to_string(all) +
                                                  " bytes out, not twice the vector's " +
                                                  std::to_string(count * sizeof(float)));
  });
  EXPECT_EQ(failures(results), "");
}

}  // namespace
}  // namespace strata::test
