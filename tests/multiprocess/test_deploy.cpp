// Deploying across firewalls (issue 38): with STRATA_PORT_RANGE every port a rank listens
// on (TCP transport, WAN link, control mesh, liveness port, UCX's own TCP listeners) lies
// in the range, and the job works; a range too small for the ranks of a host fails
// creation with an error that names it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fork_ranks.hpp"
#include "listening_ports.hpp"
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
  const auto [lo, hi] = test_range(64);
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
  const auto [lo, hi] = test_range(3);
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

}  // namespace
}  // namespace strata::test
