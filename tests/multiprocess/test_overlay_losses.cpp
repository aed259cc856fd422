// The control mesh beyond STRATA_MESH_FULL_UPTO ranks (bootstrap/mesh_overlay.hpp): 24
// ranks over TCP, each connected on the mesh to 9 others (r ± 1, 2, 4, 8 and r + 12), so
// most survivors of a loss hold no connection with the rank lost and hear of it only
// from the notices their neighbours flood. Every survivor must get PeerLostError naming
// it (a process killed; a process frozen, with a heartbeat of 1 s, found only by its two
// ring neighbours), shrink over the flooded rendezvous, and sum exactly with the rest.
// One rank's abort reaches every other rank as well.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <thread>

#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 24;
constexpr std::size_t kCount = 1001;  // odd, not divisible by the ranks

struct Shared {
  std::atomic<std::int64_t> signalled_ns{0};
};

std::int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

void settings(bool heartbeat) {
  ::setenv("STRATA_MESH_FULL_UPTO", "0", 1);
  ::setenv("STRATA_PROBE", "0", 1);
  ::setenv("STRATA_HEARTBEAT_S", heartbeat ? "1" : "0", 1);
}

std::vector<float> data_of(int old_rank) {
  std::vector<float> v(kCount);
  std::mt19937 rng(static_cast<unsigned>(old_rank) + 11);
  for (auto& x : v) x = static_cast<float>(rng() % 1000);
  return v;
}

// The survivors shrink and sum their data: exact (integers below 2^24 in f32).
void shrink_and_sum(Communicator& comm, int victim, int old_rank) {
  const std::vector<int> lost{victim};
  Communicator next = comm.shrink(lost);
  require(next.size() == kRanks - 1, "the shrunk communicator has " + std::to_string(next.size()) + " ranks");
  require(next.rank() == old_rank - (old_rank > victim ? 1 : 0), "old rank " + std::to_string(old_rank) +
                                                                      " became rank " + std::to_string(next.rank()));
  auto buf = data_of(old_rank);
  next.allreduce(buf.data(), buf.data(), kCount, DataType::f32, ReduceOp::sum).wait();
  std::vector<float> want(kCount, 0.0f);
  for (int r = 0; r < kRanks; ++r) {
    if (r == victim) continue;
    const auto d = data_of(r);
    for (std::size_t i = 0; i < kCount; ++i) want[i] += d[i];
  }
  for (std::size_t i = 0; i < kCount; ++i)
    require(buf[i] == want[i], "after the shrink, element " + std::to_string(i) + " is " + std::to_string(buf[i]) +
                                   ", expected " + std::to_string(want[i]));
  std::printf("SUMMED\n");
}

enum class How { kill, stop };

class MeshOverlay : public ::testing::TestWithParam<How> {};

TEST_P(MeshOverlay, EverySurvivorHearsOfALossAndShrinks) {
  const How how = GetParam();
  // Rank 5 is linked to 1, 3, 4, 6, 7, 9, 13, 17, 21: fourteen survivors are not.
  constexpr int kVictim = 5;
  auto* sh = static_cast<Shared*>(
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(sh, MAP_FAILED);
  new (sh) Shared;
  const auto root = free_root_address();
  auto rs = fork_ranks(kRanks, 120s, [&](int r) {
    settings(how == How::stop);
    CommOptions o;
    o.transport = TransportKind::tcp;
    o.timeout = 60s;
    Communicator comm(r, kRanks, root, o);
    if (r == kVictim) {
      comm.barrier().wait();
      if (how == How::stop && ::fork() == 0) {  // ends the frozen victim after the test
        ::sleep(4);
        ::kill(::getppid(), SIGKILL);
        ::_exit(0);
      }
      sh->signalled_ns.store(now_ns());
      ::kill(::getpid(), how == How::kill ? SIGKILL : SIGSTOP);
      ::pause();
    }
    float x = 1.0f;
    try {
      comm.barrier().wait();  // the victim may strike while others are still in it
      for (int i = 0; i < 100000; ++i) {
        comm.allreduce(&x, &x, 1, DataType::f32, ReduceOp::max).wait();
        std::this_thread::sleep_for(1ms);
      }
    } catch (const PeerLostError& e) {
      const auto ms = (now_ns() - sh->signalled_ns.load()) / 1000000;
      require(e.lost_ranks() == std::vector<int>{kVictim}, "the error names the wrong rank(s): " + std::string(e.what()));
      std::printf("LOST after %lld ms\n", static_cast<long long>(ms));
      shrink_and_sum(comm, kVictim, r);
      return;
    }
    throw std::runtime_error("the allreduces went on without the victim being lost");
  });
  long long slowest = 0;
  for (int r = 0; r < kRanks; ++r) {
    const auto& res = rs[static_cast<std::size_t>(r)];
    if (r == kVictim) continue;
    EXPECT_EQ(res.exit_code, 0) << "rank " << r << ":\n" << res.output;
    EXPECT_NE(res.output.find("SUMMED"), std::string::npos) << "rank " << r << ":\n" << res.output;
    const auto at = res.output.find("LOST after ");
    if (at != std::string::npos) slowest = std::max(slowest, std::atoll(res.output.c_str() + at + 11));
  }
  std::cout << "the last survivor heard of the loss after " << slowest << " ms\n";
  ::munmap(sh, sizeof(Shared));
}

INSTANTIATE_TEST_SUITE_P(Losses, MeshOverlay, ::testing::Values(How::kill, How::stop),
                         [](const ::testing::TestParamInfo<How>& i) {
                           return std::string(i.param == How::kill ? "killed" : "frozen");
                         });

// Communicator::abort on one rank: every other rank's next collective fails, whether it
// holds a connection with the aborting rank or only hears the flood.
TEST(MeshOverlayNotices, AnAbortReachesEveryRank) {
  const auto root = free_root_address();
  auto rs = fork_ranks(kRanks, 120s, [&](int r) {
    settings(false);
    CommOptions o;
    o.transport = TransportKind::tcp;
    o.timeout = 60s;
    Communicator comm(r, kRanks, root, o);
    if (r == kRanks - 1) {
      comm.barrier().wait();
      comm.abort();
      return;
    }
    float x = 1.0f;
    try {
      comm.barrier().wait();  // where ranks still in it when rank 23 aborts fail
      for (int i = 0; i < 100000; ++i) comm.allreduce(&x, &x, 1, DataType::f32, ReduceOp::sum).wait();
    } catch (const Error& e) {
      std::printf("FAILED as expected: %s\n", e.what());
      return;
    }
    throw std::runtime_error("the allreduces went on after a rank aborted");
  });
  EXPECT_EQ(failures(rs), "");
  for (int r = 0; r + 1 < kRanks; ++r)
    EXPECT_NE(rs[static_cast<std::size_t>(r)].output.find("FAILED as expected"), std::string::npos)
        << rs[static_cast<std::size_t>(r)].output;
}

}  // namespace
}  // namespace strata::test
