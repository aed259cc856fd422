// Deploying across firewalls (issue 38): with STRATA_PORT_RANGE every port a rank listens
// on (TCP transport, WAN link, control mesh, liveness port, UCX's own TCP listeners) lies
// in the range, and the job works; a range too small for the ranks of a host fails
// creation with an error that names it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <random>
#include <thread>
#include <set>
#include <string>
#include <vector>

#include "fork_ranks.hpp"
#include "listening_ports.hpp"
#include "netns.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

// A random stretch below the tests' rendezvous ports (20000-32000) and the kernel's
// ephemeral range: no other test's listener or outgoing connection takes its ports.
std::pair<unsigned, unsigned> test_range(unsigned width) {
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  const unsigned lo = std::uniform_int_distribution<unsigned>(10000, 19000)(rng);
  return {lo, lo + width - 1};
}

void every_listener_in_range(const char* transport) {
  const auto range_ends = test_range(64);
  const unsigned lo = range_ends.first, hi = range_ends.second;
  const std::string range = std::to_string(lo) + "-" + std::to_string(hi);
  const std::string root = free_root_address();
  const unsigned root_port = static_cast<unsigned>(std::stoul(root.substr(root.find(':') + 1)));
  auto results = fork_ranks(4, std::chrono::seconds(60), [&](int rank) {
    ::setenv("STRATA_REGION", rank < 2 ? "us" : "eu", 1);
    ::setenv("STRATA_HOST", rank < 2 ? "u0" : "e0", 1);
    ::setenv("STRATA_PORT_RANGE", range.c_str(), 1);
    ::setenv("STRATA_TRANSPORT", transport, 1);
    ::setenv("STRATA_TIMEOUT_S", "30", 1);
    Communicator comm(rank, 4, root);
    std::vector<float> v(1001, static_cast<float>(rank + 1));
    comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum).wait();
    for (float x : v) require(x == 10.0f, "allreduce gave " + std::to_string(x));
    const auto ports = listening_ports();
    std::string outside;
    int inside = 0;
    for (unsigned p : ports) {
      if (p == root_port) continue;  // the rendezvous store: STRATA_ROOT's port
      if (p < lo || p > hi)
        outside += " " + std::to_string(p);
      else
        ++inside;
    }
    require(outside.empty(), "rank " + std::to_string(rank) + " listens outside " + range + ":" + outside);
    // Transport, WAN link, control mesh and liveness port at least.
    require(inside >= 4, "rank " + std::to_string(rank) + " listens on only " + std::to_string(inside) + " ports");
    comm.barrier().wait();
  });
  EXPECT_EQ(failures(results), "");
}

TEST(PortRange, EveryListenerOverTcpIsInTheRange) { every_listener_in_range("tcp"); }
TEST(PortRange, EveryListenerOverUcxIsInTheRange) { every_listener_in_range("ucx"); }

// Keepalive on every connection a job holds (transport, WAN link, control mesh, store):
// a middlebox that forgets idle flows sees probes on each well before it would.
void every_connection_kept_alive(const char* transport) {
  const std::string root = free_root_address();
  auto results = fork_ranks(4, std::chrono::seconds(60), [&](int rank) {
    ::setenv("STRATA_REGION", rank < 2 ? "us" : "eu", 1);
    ::setenv("STRATA_HOST", rank < 2 ? "u0" : "e0", 1);
    ::setenv("STRATA_TRANSPORT", transport, 1);
    ::setenv("STRATA_TIMEOUT_S", "30", 1);
    Communicator comm(rank, 4, root);
    std::vector<float> v(100000, 1.0f);
    comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum).wait();
    comm.barrier().wait();
    const auto bare = connections_without_keepalive();
    std::string list;
    for (const auto& c : bare) list += " " + c;
    require(bare.empty(), "rank " + std::to_string(rank) + ": connections without keepalive:" + list);
    comm.barrier().wait();
  });
  EXPECT_EQ(failures(results), "");
}

TEST(Keepalive, EveryConnectionOverTcp) { every_connection_kept_alive("tcp"); }
TEST(Keepalive, EveryConnectionOverUcx) { every_connection_kept_alive("ucx"); }

// Two ranks on one host need eight ports; three are not enough, and creation says so.
TEST(PortRange, ARangeTooSmallFailsCreationNamingIt) {
  const auto range_ends = test_range(3);
  const unsigned lo = range_ends.first, hi = range_ends.second;
  const std::string range = std::to_string(lo) + "-" + std::to_string(hi);
  const std::string root = free_root_address();
  auto results = fork_ranks(2, std::chrono::seconds(60), [&](int rank) {
    ::setenv("STRATA_PORT_RANGE", range.c_str(), 1);
    ::setenv("STRATA_TRANSPORT", "tcp", 1);
    ::setenv("STRATA_TIMEOUT_S", "5", 1);
    try {
      Communicator comm(rank, 2, root);
    } catch (const Error& e) {
      const std::string what = e.what();
      // The rank that ran out names the range; its peer may only see it gone.
      if (what.find("STRATA_PORT_RANGE=" + range) != std::string::npos) std::_Exit(3);
      std::_Exit(4);
    }
    std::_Exit(5);
  });
  int named = 0;
  for (const auto& r : results) {
    EXPECT_NE(r.exit_code, 5) << "rank " << r.rank << " created a communicator in a range of 3:\n" << r.output;
    named += r.exit_code == 3;
  }
  EXPECT_GE(named, 1) << failures(results);
}

// Two regions, each behind NAT and a firewall that admits only its port range and the
// rendezvous port (NetnsPair::behind_nat): ranks 0-1 in one, 2-3 in the other. Every
// listener binds the region's private address; the other region reaches it at the
// public one. `advertise`: STRATA_ADVERTISE_ADDR set to it; `ranged`: STRATA_PORT_RANGE
// set to the ports the firewall opens. Each rank prints "OK" after an exact
// hierarchical allreduce, or "ERROR: <what>" when creation failed.
// `kill`: then rank 3 dies, and the survivors shrink and reduce again, exactly.
// `wan_link` false: STRATA_WAN_LINK=0, so the TCP transport itself crosses the NAT.
std::vector<RankResult> behind_nat(bool advertise, bool ranged, bool kill = false, bool wan_link = true) {
  const NetnsPair net;
  const auto range_ends = test_range(40);
  const unsigned lo = range_ends.first, hi = range_ends.second;
  const unsigned root_port = hi + 1;
  const std::string open = std::to_string(lo) + ":" + std::to_string(root_port);
  net.behind_nat(0, open);
  net.behind_nat(1, open);
  // The rendezvous store is served by rank 0 on every interface, reached at region 0's
  // public address (its own region's ranks too: their packets never leave the host).
  const std::string root = net.address(0) + ":" + std::to_string(root_port);
  return fork_ranks(4, std::chrono::seconds(90), [&](int r) {
    const int side = r < 2 ? 0 : 1;
    net.enter(side);
    ::setenv("STRATA_REGION", side == 0 ? "a" : "b", 1);
    ::setenv("STRATA_HOST", side == 0 ? "a0" : "b0", 1);
    ::setenv("STRATA_SOCKET_IFADDR", net.private_address(side).c_str(), 1);
    ::setenv("STRATA_SOCKET_BIND_ANY", "1", 1);
    ::setenv("STRATA_JOB_SECRET", "nat test", 1);
    ::setenv("STRATA_TRANSPORT", "tcp", 1);
    ::setenv("STRATA_TIMEOUT_S", "8", 1);
    if (!wan_link) ::setenv("STRATA_WAN_LINK", "0", 1);
    if (advertise) ::setenv("STRATA_ADVERTISE_ADDR", net.address(side).c_str(), 1);
    if (ranged) ::setenv("STRATA_PORT_RANGE", (std::to_string(lo) + "-" + std::to_string(hi)).c_str(), 1);
    try {
      Communicator comm(r, 4, root);
      std::vector<float> v(300001, static_cast<float>(r + 1));
      comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum).wait();
      for (float x : v) require(x == 10.0f, "allreduce gave " + std::to_string(x));
      if (kill) {
        std::vector<int> lost;
        try {
          // Rank 3 leaves the barrier and dies while a survivor may still be in it: that
          // survivor hears of it there.
          comm.barrier().wait();
          if (r == 3) ::kill(::getpid(), SIGKILL);
          for (int i = 0; i < 200; ++i) {
            comm.allreduce(v.data(), v.data(), 1, DataType::f32, ReduceOp::sum).wait();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        } catch (const PeerLostError& e) {
          lost = e.lost_ranks();
        }
        require(lost == std::vector<int>{3}, "the survivors did not all name rank 3 lost");
        Communicator three = comm.shrink(lost);
        std::vector<float> w(100003, static_cast<float>(r + 1));
        three.allreduce(w.data(), w.data(), w.size(), DataType::f32, ReduceOp::sum).wait();
        for (float x : w) require(x == 6.0f, "after the shrink allreduce gave " + std::to_string(x));
      } else {
        comm.barrier().wait();
      }
      std::printf("OK\n");
    } catch (const Error& e) {
      std::printf("ERROR: %s\n", e.what());
    }
  });
}

int count_lines(const std::vector<RankResult>& rs, const std::string& what) {
  int n = 0;
  for (const auto& r : rs)
    for (std::size_t at = 0; (at = r.output.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

TEST(Nat, TwoRegionsBehindNatWithAdvertisedAddressesAndAPortRange) {
  if (const auto why = NetnsPair::unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto rs = behind_nat(true, true);
  ASSERT_EQ(failures(rs), "");
  EXPECT_EQ(count_lines(rs, "OK\n"), 4) << rs[0].output << rs[2].output;
}

// Without the WAN link the TCP transport carries the traffic between regions: a peer in
// the other region is dialled at its advertised address.
TEST(Nat, WithoutTheWanLinkTheTcpTransportCrossesTheNat) {
  if (const auto why = NetnsPair::unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto rs = behind_nat(true, true, false, false);
  ASSERT_EQ(failures(rs), "");
  EXPECT_EQ(count_lines(rs, "OK\n"), 4) << rs[0].output << rs[2].output;
}

// A rank dies behind the NAT: the others hear of it, shrink, and go on across it.
TEST(Nat, AShrinkAfterAKillWorksBehindNat) {
  if (const auto why = NetnsPair::unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto rs = behind_nat(true, true, true);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(rs[r].exit_code, 0) << rs[r].output;
  EXPECT_EQ(count_lines(rs, "OK\n"), 3) << rs[0].output << rs[2].output;
}

// Without the advertised address the other region dials a private one it has no route
// to, and creation fails naming the address and the setting.
TEST(Nat, WithoutTheAdvertisedAddressCreationNamesIt) {
  if (const auto why = NetnsPair::unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto rs = behind_nat(false, true);
  ASSERT_EQ(failures(rs), "");
  EXPECT_EQ(count_lines(rs, "OK\n"), 0);
  EXPECT_GE(count_lines(rs, "STRATA_ADVERTISE_ADDR"), 1) << rs[0].output << rs[2].output;
  std::cout << rs[0].output << rs[2].output;
}

// Without the port range the listeners take ports the firewall drops.
TEST(Nat, WithoutThePortRangeCreationNamesIt) {
  if (const auto why = NetnsPair::unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto rs = behind_nat(true, false);
  ASSERT_EQ(failures(rs), "");
  EXPECT_EQ(count_lines(rs, "OK\n"), 0);
  EXPECT_GE(count_lines(rs, "STRATA_PORT_RANGE"), 1) << rs[0].output << rs[2].output;
  std::cout << rs[0].output << rs[2].output;
}

}  // namespace
}  // namespace strata::test
