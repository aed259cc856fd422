// Shrinking and spreading a failure, the cases cheap enough for the ThreadSanitizer run:
// a healthy communicator shrinks (and bad arguments and disagreeing survivors fail on
// every rank), and a mismatch between two ranks that are not ring neighbours reaches
// every rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <unistd.h>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "fork_ranks.hpp"
#include "store_process.hpp"
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

// The probe of issue 34: a world of 5 loses rank 4; ranks 0 and 1 exclude {2, 3, 4} while
// ranks 2 and 3 exclude {0, 1, 4}, as the two sides of a partition would. Without an
// arbiter neither pair may go on (each is half of the ranks not known dead); with one,
// exactly one pair does. Before, both got a working communicator and no error.
void two_sided_shrink(bool with_arbiter) {
  const auto root = free_root_address();
  std::optional<StoreProcess> arbiter;
  if (with_arbiter) arbiter.emplace();
  auto rs = fork_ranks(5, 60s, [&](int r) {
    CommOptions o = tcp(20s);
    if (arbiter) o.arbiter = connect_store(arbiter->id());
    Communicator comm(r, 5, root, o);
    // Rank 4 dies without a goodbye, but only once every rank is through creation (it
    // leaves the barrier after all entered it): one still creating could otherwise be
    // waiting for a message rank 4 never flushed, and fail there instead of in the shrink.
    if (r == 4) {
      comm.barrier().wait();
      ::_exit(0);
    }
    try {
      comm.barrier().wait();
    } catch (const PeerLostError&) {  // rank 4 left it first and died: heard here
    }
    const auto t0 = Clock::now();
    while (comm.lost_ranks() != std::vector<int>{4}) {
      require(Clock::now() - t0 < 10s, "rank 4 was not found lost");
      std::this_thread::sleep_for(10ms);
    }
    const std::vector<int> others = r < 2 ? std::vector<int>{2, 3, 4} : std::vector<int>{0, 1, 4};
    try {
      Communicator half = comm.shrink(others, o);
      std::int64_t v = 1;
      half.allreduce(&v, &v, 1, DataType::i64, ReduceOp::sum).wait();
      std::printf("WENT ON with %d ranks, sum %lld\n", half.size(), static_cast<long long>(v));
    } catch (const QuorumLostError& e) {
      std::printf("QUORUM LOST %s\n", e.what());
    }
  });
  ASSERT_EQ(failures(rs), "");
  int went_on = 0;
  for (int r = 0; r < 4; ++r) {
    const auto& out = rs[static_cast<std::size_t>(r)].output;
    if (out.find("WENT ON with 2 ranks, sum 2") != std::string::npos) {
      ++went_on;
      continue;
    }
    EXPECT_NE(out.find("QUORUM LOST shrink on rank " + std::to_string(r) + ": 2 of the 4 ranks not known dead take part"),
              std::string::npos) << out;
    EXPECT_NE(out.find(with_arbiter ? "the arbiter gave the communicator to the other half" : "no arbiter"),
              std::string::npos) << out;
    EXPECT_NE(out.find("can rejoin the ranks that went on"), std::string::npos) << out;
  }
  EXPECT_EQ(went_on, with_arbiter ? 2 : 0);
  if (with_arbiter) {  // the pair that went on is one side, not a rank of each
    EXPECT_EQ(rs[0].output.find("WENT ON") != std::string::npos, rs[1].output.find("WENT ON") != std::string::npos);
  }
}

TEST(PeerLossShrink, TwoSidesOfAPartitionNeitherGoesOnWithoutAnArbiter) { two_sided_shrink(false); }
TEST(PeerLossShrink, TwoSidesOfAPartitionOnlyOneGoesOnWithAnArbiter) { two_sided_shrink(true); }

// A rank that is the only survivor of two goes on: its peer's process is known gone.
TEST(PeerLossShrink, TheLastRankOfTwoGoesOnWhenThePeerIsKnownDead) {
  const auto root = free_root_address();
  auto rs = fork_ranks(2, 60s, [&](int r) {
    Communicator comm(r, 2, root, tcp(20s));
    if (r == 1) ::_exit(0);
    const auto t0 = Clock::now();
    while (comm.lost_ranks().empty()) {
      require(Clock::now() - t0 < 10s, "rank 1 was not found lost");
      std::this_thread::sleep_for(10ms);
    }
    const int one[] = {1};
    Communicator alone = comm.shrink(one, tcp(20s));
    require(alone.size() == 1, "the shrunk communicator has " + std::to_string(alone.size()) + " ranks");
  });
  EXPECT_EQ(rs[0].exit_code, 0) << rs[0].output;
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
