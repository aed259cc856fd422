// Shrinking and spreading a failure, the cases cheap enough for the ThreadSanitizer run:
// a healthy communicator shrinks (and bad arguments and disagreeing survivors fail on
// every rank), and a mismatch between two ranks that are not ring neighbours reaches
// every rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 4;

CommOptions tcp(std::chrono::milliseconds timeout) {
  CommOptions o;
  o.transport = TransportKind::tcp;
  o.timeout = timeout;
  return o;
}

// Shrinking a healthy communicator: rank 3 stays out, the others go on without it. Then
// survivors that disagree on whom to exclude: every one of them fails, none gets a world.
TEST(PeerLossShrink, HealthyShrinkAndDisagreement) {
  const auto root = free_root_address();
  auto rs = fork_ranks(kRanks, 60s, [&](int r) {
    const CommOptions o = tcp(20s);
    Communicator comm(r, kRanks, root, o);
    if (r == 3) {
      std::this_thread::sleep_for(3s);
      return;
    }
    const int three[] = {3}, self[] = {r}, out_of_range[] = {4};
    try {
      comm.shrink(self, o);
      throw std::runtime_error("shrink excluding the caller passed");
    } catch (const InvalidArgument& e) {
      std::printf("SELF %s\n", e.what());
    }
    try {
      comm.shrink(out_of_range, o);
      throw std::runtime_error("shrink excluding rank 4 of 4 passed");
    } catch (const InvalidArgument& e) {
      std::printf("RANGE %s\n", e.what());
    }
    Communicator three_ranks = comm.shrink(three, o);
    std::vector<std::int64_t> v(1001, r + 1);
    three_ranks.allreduce(v.data(), v.data(), v.size(), DataType::i64, ReduceOp::sum).wait();
    require(v[0] == 6 && v[1000] == 6, "the shrunk allreduce gave " + std::to_string(v[0]));
    // Rank 2 thinks rank 1 is gone too.
    const int one_three[] = {1, 3};
    try {
      comm.shrink(r == 2 ? std::span<const int>(one_three) : std::span<const int>(three), o);
      throw std::runtime_error("a shrink the survivors disagree on passed");
    } catch (const MismatchError& e) {
      std::printf("DISAGREE %s\n", e.what());
    }
  });
  ASSERT_EQ(failures(rs), "");
  for (int r = 0; r < 3; ++r) {
    const auto& out = rs[static_cast<std::size_t>(r)].output;
    EXPECT_NE(out.find("SELF shrink on rank " + std::to_string(r) + ": this rank is among the ranks to exclude"),
              std::string::npos) << out;
    EXPECT_NE(out.find("RANGE shrink on rank " + std::to_string(r) + ": lost rank 4 is out of range for 4 ranks"),
              std::string::npos) << out;
    EXPECT_NE(out.find("DISAGREE"), std::string::npos) << out;
    EXPECT_NE(out.find(r == 2 ? "rank 0 excludes ranks {3} but this rank excludes {1, 3}" : "rank 2 excludes ranks {1, 3}"),
              std::string::npos) << out;
  }
}

// Ranks 0 and 2 disagree (count); ranks 1 and 3 agree with rank 0. Only ranks 2 and 3 see
// a neighbour's fingerprint differ; ranks 0 and 1 learn it from them.
TEST(PeerLossMismatch, NonAdjacentMismatchReachesEveryRank) {
  const auto root = free_root_address();
  auto rs = fork_ranks(kRanks, 60s, [&](int r) {
    Communicator comm(r, kRanks, root, tcp(30s));
    const std::size_t n = r == 2 ? 11 : 10;
    std::vector<float> buf(n, 1.0f);
    const auto t0 = Clock::now();
    try {
      comm.allreduce(buf.data(), buf.data(), n, DataType::f32, ReduceOp::sum).wait();
    } catch (const MismatchError& e) {
      std::printf("MISMATCH after %lld ms: %s\n",
                  static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()),
                  e.what());
      return;
    }
    throw std::runtime_error("the mismatched allreduce passed");
  });
  ASSERT_EQ(failures(rs), "");
  for (const auto& res : rs) {
    EXPECT_NE(res.output.find("MISMATCH after"), std::string::npos) << res.output;
    EXPECT_NE(res.output.find("f32 x 11"), std::string::npos) << res.output;
  }
}

}  // namespace
}  // namespace strata::test
