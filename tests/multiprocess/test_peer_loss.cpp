// A rank lost in the middle of a collective: killed (SIGKILL), or frozen (SIGSTOP) with a
// heartbeat of 1 s. 4 ranks in 2 regions run 64 MiB allreduces over TCP, UCX, or TCP
// inside the regions and the WAN link (5 ms emulated delay) between them; every survivor
// must get PeerLostError naming the lost rank within 2 s of the signal, whichever rank it
// was (rank 0, a region's leader, or not), then shrink to the three survivors and get the
// exact sum of their data from the next 64 MiB allreduce. (test_shrink.cpp: the cheap
// cases, which the ThreadSanitizer run takes too.)
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

constexpr int kRanks = 4;
constexpr std::size_t kCount = (64u << 20) / sizeof(float);
// The bar of the issue: from the signal to the error on every survivor.
constexpr auto kBar = 2s;

// Shared by the forked ranks (CLOCK_MONOTONIC is the same clock in every process).
struct Shared {
  std::atomic<std::int64_t> signalled_ns{0};
};

Shared* shared_page() {
  void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
  return new (p) Shared;
}

std::int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

struct Fabric {
  const char* name;
  TransportKind kind;
  bool wan_link;
};

enum class How { kill, stop };

struct Case {
  Fabric fabric;
  int victim;
  How how;
};

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  return std::string(i.param.fabric.name) + "_rank" + std::to_string(i.param.victim) +
         (i.param.how == How::kill ? "_killed" : "_frozen");
}

void place(int rank, const Fabric& f) {
  const std::string region = rank < kRanks / 2 ? "east" : "west";
  ::setenv("STRATA_REGION", region.c_str(), 1);
  ::setenv("STRATA_HOST", (region + "-host" + std::to_string(rank % 2)).c_str(), 1);
  ::setenv("STRATA_WAN_LINK", f.wan_link ? "1" : "0", 1);
  if (f.wan_link) ::setenv("STRATA_WAN_EMULATE", "delay=5ms", 1);
  ::setenv("STRATA_PROBE", "0", 1);
}

// The victim's end: SIGKILL, or SIGSTOP with a helper process that kills it later so the
// test does not wait for its time limit.
void strike(How how, Shared* sh) {
  const pid_t me = ::getpid();
  if (how == How::stop && ::fork() == 0) {
    ::sleep(3);
    ::kill(me, SIGKILL);
    ::_exit(0);
  }
  sh->signalled_ns.store(now_ns());
  ::kill(me, how == How::kill ? SIGKILL : SIGSTOP);
}

// The survivors' next step: shrink, then one 64 MiB allreduce whose result must be the
// exact sum of the survivors' data (integers below 2^24 add exactly in f32). Every
// survivor's data is regenerated from its old rank's seed.
void shrink_and_check(Communicator& comm, const std::vector<int>& lost, int old_rank, const std::vector<float>& mine,
                      Shared* sh, const CommOptions& o) {
  Communicator next = comm.shrink(lost, o);
  require(next.size() == kRanks - 1, "the shrunk communicator has " + std::to_string(next.size()) + " ranks");
  const int expect_rank = old_rank - (old_rank > lost[0] ? 1 : 0);
  require(next.rank() == expect_rank, "old rank " + std::to_string(old_rank) + " became rank " + std::to_string(next.rank()));
  std::vector<float> buf = mine;
  next.allreduce(buf.data(), buf.data(), kCount, DataType::f32, ReduceOp::sum).wait();
  const auto after = std::chrono::nanoseconds(now_ns() - sh->signalled_ns.load());
  std::vector<float> want(kCount, 0.0f);
  for (int r = 0; r < kRanks; ++r) {
    if (r == lost[0]) continue;
    std::mt19937 rng(static_cast<unsigned>(r));
    for (auto& x : want) x += static_cast<float>(rng() % 1000);
  }
  for (std::size_t i = 0; i < kCount; ++i)
    if (buf[i] != want[i])
      throw std::runtime_error("after the shrink, element " + std::to_string(i) + " is " + std::to_string(buf[i]) +
                               ", expected " + std::to_string(want[i]));
  std::printf("NEXT STEP after %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(after).count()));
}

class PeerLoss : public ::testing::TestWithParam<Case> {};

TEST_P(PeerLoss, EverySurvivorNamesTheLostRankInTime) {
  const Case c = GetParam();
  Shared* sh = shared_page();
  const auto root = free_root_address();
  auto rs = fork_ranks(kRanks, 120s, [&](int r) {
    place(r, c.fabric);
    if (c.how == How::stop) ::setenv("STRATA_HEARTBEAT_S", "1", 1);
    CommOptions o;
    o.transport = c.fabric.kind;
    o.timeout = 60s;  // far beyond the bar: only the loss may end the loop
    Communicator comm(r, kRanks, root, o);
    std::vector<float> buf(kCount);
    std::mt19937 rng(static_cast<unsigned>(r));
    for (auto& x : buf) x = static_cast<float>(rng() % 1000);
    const std::vector<float> mine = buf;
    std::thread striker;
    if (r == c.victim) {
      // A whole first allreduce, then the strike; the others may still be finishing that
      // one when it comes, so their loop counts it.
      comm.allreduce(buf.data(), buf.data(), kCount, DataType::f32, ReduceOp::sum).wait();
      striker = std::thread([&] {
        std::this_thread::sleep_for(150ms);  // into the allreduce below
        strike(c.how, sh);
      });
    }
    try {
      for (int i = 0; i < 41; ++i) comm.allreduce(buf.data(), buf.data(), kCount, DataType::f32, ReduceOp::sum).wait();
    } catch (const PeerLostError& e) {
      const auto after = std::chrono::nanoseconds(now_ns() - sh->signalled_ns.load());
      std::string lost;
      for (int x : e.lost_ranks()) lost += (lost.empty() ? "" : ",") + std::to_string(x);
      std::printf("LOST %s after %lld ms: %s\n", lost.c_str(),
                  static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(after).count()), e.what());
      require(sh->signalled_ns.load() != 0, "PeerLostError before any rank was signalled");
      require(e.lost_ranks() == std::vector<int>{c.victim}, "the error names the wrong rank(s): " + std::string(e.what()));
      require(after < kBar, "the loss took longer than 2 s to reach this rank");
      if (striker.joinable()) striker.join();
      shrink_and_check(comm, e.lost_ranks(), r, mine, sh, o);
      return;
    }
    throw std::runtime_error("41 allreduces passed without the victim being lost");
  });
  for (int r = 0; r < kRanks; ++r) {
    const auto& res = rs[static_cast<std::size_t>(r)];
    if (r == c.victim) {
      EXPECT_EQ(res.exit_code, -1) << "the victim was not killed:\n" << res.output;
      continue;
    }
    EXPECT_EQ(res.exit_code, 0) << "rank " << r << ":\n" << res.output;
    const auto at = res.output.find("LOST " + std::to_string(c.victim) + " after");
    EXPECT_NE(at, std::string::npos) << res.output;
    // The detection time, for the record (ctest --output-on-failure -V shows it).
    if (at != std::string::npos) std::cout << "rank " << r << ": " << res.output.substr(at, res.output.find('\n', at) - at) << "\n";
    const auto next = res.output.find("NEXT STEP after");
    EXPECT_NE(next, std::string::npos) << res.output;
    if (next != std::string::npos) std::cout << "rank " << r << ": " << res.output.substr(next, res.output.find('\n', next) - next) << "\n";
  }
  ::munmap(sh, sizeof(Shared));
}

std::vector<Case> cases() {
  const Fabric fabrics[] = {{"tcp", TransportKind::tcp, false}, {"ucx", TransportKind::ucx, false},
                            {"wan", TransportKind::tcp, true}};
  std::vector<Case> out;
  for (const auto& f : fabrics)
    for (How h : {How::kill, How::stop})
      for (int v = 0; v < kRanks; ++v) out.push_back(Case{f, v, h});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Positions, PeerLoss, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace strata::test
