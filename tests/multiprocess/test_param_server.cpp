// Dedicated parameter servers: N forked workers and S forked server processes
// (strata::serve), workers forcing CallOptions::algorithm = "param_server" for every
// allreduce and reduce_scatter case against the reference, over TCP and UCX, with 1 and
// 2 servers. Servers must end by themselves once the workers close.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ostream>

#include "collective_check.hpp"
#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

struct Param {
  TransportKind transport;
  int workers;
  int servers;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << to_string(p.transport) << "/" << p.workers << "w/" << p.servers << "s";
}

std::vector<Case> served_cases(int p) {
  std::vector<Case> out;
  for (const Case& c : cases(p, false))
    if (c.kind == CollectiveKind::allreduce || c.kind == CollectiveKind::reduce_scatter) out.push_back(c);
  // Many chunks per shard (chunks of 4 KiB), in and out of place.
  out.push_back({CollectiveKind::allreduce, DataType::f32, ReduceOp::sum, (1u << 18) + 5, 0, false});
  out.push_back({CollectiveKind::reduce_scatter, DataType::f32, ReduceOp::avg, (1u << 16) + 3, 0, true});
  return out;
}

// Children 0..workers-1 are workers, the rest servers; `worker` runs on each worker.
// `setup(child)` may change the environment after the defaults.
std::vector<RankResult> run_job(const Param& prm, const std::function<void(Communicator&)>& worker,
                                bool expect_served = true, const std::function<void(int)>& setup = {}) {
  const std::string root = free_root_address();
  return fork_ranks(prm.workers + prm.servers, std::chrono::seconds(120), [&](int child) {
    ::setenv("STRATA_CHUNK_BYTES", "4096", 1);
    ::setenv("STRATA_TIMEOUT_S", "60", 1);
    ::setenv("STRATA_SERVERS", std::to_string(prm.servers).c_str(), 1);
    if (setup) setup(child);
    CommOptions co;
    co.transport = prm.transport;
    if (child >= prm.workers) {
      ServerOptions so;
      so.index = child - prm.workers;
      so.servers = prm.servers;
      so.workers = prm.workers;
      so.root = root;
      so.comm = co;
      const ServerStats st = serve(so);
      require(!expect_served || st.operations > 0, "server " + std::to_string(so.index) + " served nothing");
      return;
    }
    Communicator comm(child, prm.workers, root, co);
    worker(comm);
  });
}

class ParamServer : public ::testing::TestWithParam<Param> {};

TEST_P(ParamServer, MatchesReference) {
  const Param prm = GetParam();
  const auto results = run_job(prm, [&](Communicator& comm) {
    CallOptions o;
    o.algorithm = "param_server";
    run_all(comm, served_cases(prm.workers), o);
  });
  EXPECT_EQ(failures(results), "");
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (auto t : {TransportKind::tcp, TransportKind::ucx})
    for (int s = 1; s <= 2; ++s)
      for (int n = 1; n <= 6; ++n) out.push_back({t, n, s});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Servers, ParamServer, ::testing::ValuesIn(params()), [](const auto& info) {
  return std::string(to_string(info.param.transport)) + "_" + std::to_string(info.param.workers) + "workers_" +
         std::to_string(info.param.servers) + "servers";
});

// Workers whose chunk sizes differ would push differently cut streams (the servers would
// refuse them): creation refuses them first, on every worker and server, naming the setting.
TEST(ParamServerErrors, WorkersThatDisagreeAreRefusedAtCreation) {
  const Param prm{TransportKind::tcp, 2, 2};
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = run_job(
      prm, [&](Communicator&) { throw std::runtime_error("creation passed"); }, false,
      [](int child) {
        if (child == 1) ::setenv("STRATA_CHUNK_BYTES", "8192", 1);
      });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  for (const auto& r : results)
    EXPECT_NE(r.output.find("STRATA_CHUNK_BYTES differs between ranks: 4096 on "), std::string::npos) << r.output;
}

// A worker waiting for a server that never starts fails at creation, naming it.
TEST(ParamServerErrors, MissingServerIsNamedAtCreation) {
  const std::string root = free_root_address();
  const auto results = fork_ranks(2, std::chrono::seconds(60), [&](int rank) {
    ::setenv("STRATA_SERVERS", "2", 1);
    ::setenv("STRATA_TIMEOUT_S", "3", 1);
    std::string msg;
    try {
      Communicator comm(rank, 2, root, CommOptions{TransportKind::tcp, {}});
    } catch (const TimeoutError& e) {
      msg = e.what();
    }
    require(msg.find("server(s) 0, 1 of 2 did not join") != std::string::npos, "message: " + msg);
  });
  EXPECT_EQ(failures(results), "");
}

// Without servers param_server is a bad argument, refused before anything is sent.
TEST(ParamServerErrors, ForcingItWithoutServersIsAnInvalidArgument) {
  const std::string root = free_root_address();
  const auto results = fork_ranks(1, std::chrono::seconds(60), [&](int rank) {
    Communicator comm(rank, 1, root, CommOptions{TransportKind::tcp, {}});
    float x = 1, y = 0;
    CallOptions o;
    o.algorithm = "param_server";
    std::string msg;
    try {
      comm.allreduce(&x, &y, 1, DataType::f32, ReduceOp::sum, o);
    } catch (const InvalidArgument& e) {
      msg = e.what();
    }
    require(msg.find("without dedicated servers") != std::string::npos, "message: " + msg);
    o.algorithm.clear();
    comm.allreduce(&x, &y, 1, DataType::f32, ReduceOp::sum, o).wait();
    require(y == 1, "allreduce after the refused call");
  });
  EXPECT_EQ(failures(results), "");
}

}  // namespace
}  // namespace strata::test
