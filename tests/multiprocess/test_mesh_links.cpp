// A control-mesh connection is not a rank (issue 34): connections reset by hand while both
// processes live, and every idle flow a middlebox forgot, are dialled again; no rank is
// declared lost and every result stays exact. And an idle beat keeps a middlebox from
// forgetting the mesh's flows at all.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>

#include "fork_ranks.hpp"
#include "netns.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Shared {
  std::atomic<long> pid[8];
  std::atomic<int> steps[8];
};

Shared* shared_page() {
  void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
  return new (p) Shared{};
}

// One allreduce whose sum every rank knows; a wrong one throws.
void exact_step(Communicator& comm, int step) {
  std::vector<std::int64_t> v(1000, comm.rank() + step);
  comm.allreduce(v.data(), v.data(), v.size(), DataType::i64, ReduceOp::sum).wait();
  const std::int64_t n = comm.size(), want = n * (n - 1) / 2 + n * step;
  require(v[0] == want && v[999] == want, "step " + std::to_string(step) + ": sum " + std::to_string(v[0]));
}

void expect_none_lost(const std::vector<RankResult>& rs, int ranks) {
  for (int r = 0; r < ranks; ++r) {
    const auto& out = rs[static_cast<std::size_t>(r)].output;
    EXPECT_NE(out.find("DONE"), std::string::npos) << "rank " << r << ": " << out;
    EXPECT_EQ(out.find("was lost"), std::string::npos) << "rank " << r << ": " << out;
  }
}

int count(const std::vector<RankResult>& rs, const std::string& what) {
  int n = 0;
  for (const auto& r : rs)
    for (auto at = r.output.find(what); at != std::string::npos; at = r.output.find(what, at + 1)) ++n;
  return n;
}

// The local ports of a process's established TCP connections, from `ss`.
std::vector<std::string> established_ports(long pid) {
  std::vector<std::string> ports;
  FILE* f = ::popen("ss -tnpH state established 2>/dev/null", "r");
  if (!f) return ports;
  char line[1024];
  const std::string tag = "pid=" + std::to_string(pid) + ",";
  while (std::fgets(line, sizeof line, f)) {
    const std::string l(line);
    if (l.find(tag) == std::string::npos) continue;
    // "0 0 127.0.0.1:41234 127.0.0.1:38765 users:..." : the first address is ours.
    std::size_t at = 0;
    for (int field = 0; field < 2; ++field) at = l.find_first_not_of(' ', l.find(' ', at));
    const std::string local = l.substr(at, l.find(' ', at) - at);
    ports.push_back(local.substr(local.rfind(':') + 1));
  }
  ::pclose(f);
  return ports;
}

// Four ranks whose data moves through UCX's shared memory, so that every TCP connection
// of rank 1 is its control mesh's (and its idle store client's); a fifth process kills
// all of them with `ss -K` in the middle of the ranks' allreduces.
TEST(MeshLinks, ConnectionsResetByHandAreDialledAgain) {
  if (::geteuid() != 0) GTEST_SKIP() << "ss -K needs root";
  Shared* sh = shared_page();
  constexpr int kRanks = 4;
  const auto root = free_root_address();
  auto rs = fork_ranks(kRanks + 1, 90s, [&](int r) {
    if (r == kRanks) {  // the hand that resets
      const auto t0 = Clock::now();
      for (int q = 0; q < kRanks; ++q)
        while (sh->steps[q].load() < 20) {
          require(Clock::now() - t0 < 60s, "the ranks did not get going");
          std::this_thread::sleep_for(10ms);
        }
      const auto ports = established_ports(sh->pid[1].load());
      for (const auto& p : ports) run_command("ss -K state established '( sport = :" + p + " )'");
      std::printf("RESET %zu connections of rank 1\n", ports.size());
      return;
    }
    ::setenv("UCX_TLS", "sm,self", 1);
    ::setenv("STRATA_DEBUG", "INFO", 1);
    ::setenv("STRATA_HEARTBEAT_S", "2", 1);
    sh->pid[r].store(::getpid());
    CommOptions o;
    o.transport = TransportKind::ucx;
    o.timeout = 30s;
    Communicator comm(r, kRanks, root, o);
    for (int step = 0; step < 200; ++step) {
      exact_step(comm, step);
      sh->steps[r].store(step + 1);
      std::this_thread::sleep_for(15ms);
    }
    comm.barrier().wait();
    std::printf("DONE\n");
  });
  ASSERT_EQ(failures(rs), "");
  EXPECT_NE(rs[kRanks].output.find("RESET"), std::string::npos);
  EXPECT_EQ(rs[kRanks].output.find("RESET 0 "), std::string::npos) << rs[kRanks].output;
  expect_none_lost(rs, kRanks);
  EXPECT_GE(count(rs, "is connected again"), 3) << "rank 1's three mesh connections came back";
  ::munmap(sh, sizeof(Shared));
}

// Two regions in two network namespaces; on region b's side a middlebox forgets flows
// idle for 2 s, then drops their packets or resets them. Bursts of allreduces with 3 s of
// silence in between: without keepalive every connection that crosses is forgotten, and
// the mesh and the WAN link dial theirs again (a silent drop is found by the mesh's
// silence and the streams' unacknowledged bytes); with a 1 s keepalive none is forgotten.
std::vector<RankResult> through_a_middlebox(const char* keepalive_s, NetnsPair::Forget how) {
  const NetnsPair net;
  net.forget_idle_flows(2s, how);
  const std::string root = net.address(0) + ":" + std::to_string(29000 + ::getpid() % 1000);
  return fork_ranks(4, 150s, [&](int r) {
    const int side = r < 2 ? 0 : 1;
    net.enter(side);
    ::setenv("STRATA_REGION", side == 0 ? "a" : "b", 1);
    ::setenv("STRATA_KEEPALIVE_S", keepalive_s, 1);
    ::setenv("STRATA_DEBUG", "INFO", 1);
    ::setenv("STRATA_JOB_SECRET", "middlebox test", 1);
    // One stream per peer, and no latency lane beside it (these steps' 8 KB messages would
    // go on its two streams): with several, each stream idle past the middlebox's timeout
    // costs a stall of its own at its next use (STRATA_KEEPALIVE_S keeps them all).
    ::setenv("STRATA_WAN_STREAMS", "1", 1);
    ::setenv("STRATA_WAN_LATENCY_STREAMS", "0", 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    o.timeout = 30s;
    Communicator comm(r, 4, root, o);
    int step = 0;
    for (int burst = 0; burst < 3; ++burst) {
      if (burst > 0) std::this_thread::sleep_for(3s);
      for (int i = 0; i < 10; ++i) exact_step(comm, step++);
    }
    // The last steps right after a burst: a rank that leaves while its goodbye sits in a
    // flow the middlebox forgot is taken for dead by a peer still waiting for it.
    exact_step(comm, step);
    std::printf("DONE\n");
  });
}

// Every rank done, none lost, and the mesh's connections dialled again (or, with a
// keepalive shorter than the middlebox's memory, never broken).
void expect_through(const char* keepalive_s, NetnsPair::Forget how, bool redialled) {
  if (const auto why = NetnsPair::unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto rs = through_a_middlebox(keepalive_s, how);
  ASSERT_EQ(failures(rs), "");
  expect_none_lost(rs, 4);
  if (redialled)
    EXPECT_GE(count(rs, "is connected again"), 1) << "no mesh connection was reset: did the middlebox forget nothing?";
  else
    EXPECT_EQ(count(rs, "control mesh: the connection with rank"), 0);
}

TEST(MeshLinks, IdleFlowsAMiddleboxDropsAreDialledAgain) { expect_through("0", NetnsPair::Forget::silently, true); }
TEST(MeshLinks, IdleFlowsAMiddleboxResetsAreDialledAgain) { expect_through("0", NetnsPair::Forget::with_reset, true); }
TEST(MeshLinks, AnIdleBeatKeepsTheMiddleboxFromForgetting) { expect_through("1", NetnsPair::Forget::silently, false); }

}  // namespace
}  // namespace strata::test
