// Every registered algorithm x every collective it claims, forced with
// CallOptions::algorithm on N = 1..6 forked ranks, against the reference (and bitwise
// identity across ranks). The list comes from the registry, so a new algorithm is tested
// here without new test code. A few dtype/op pairs per algorithm keep it quick; sizes
// cover 0, 1, odd, non-divisible and multi-chunk (chunks of 4 KiB), over TCP and UCX.
#include <gtest/gtest.h>

#include <ostream>

#include <cstdlib>

#include "collective_check.hpp"
#include "collectives/registry.hpp"
#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

using collectives::Algorithm;

struct Param {
  std::string algorithm;
  TransportKind transport;
  int ranks;
};

// Readable test names in ctest's listing instead of the parameter's raw bytes.
void PrintTo(const Param& p, std::ostream* os) {
  *os << p.algorithm << "/" << to_string(p.transport) << "/" << p.ranks;
}

// shape: the world's, as the communicator sees it (shared memory over UCX on one host).
std::vector<Case> algorithm_cases(const Algorithm& a, collectives::GroupShape shape) {
  const int p = shape.size;
  const CollectiveKind kinds[] = {CollectiveKind::allreduce, CollectiveKind::reduce_scatter,
                                  CollectiveKind::allgather, CollectiveKind::broadcast,
                                  CollectiveKind::reduce};
  struct TypeOp {
    DataType dt;
    ReduceOp op;
  };
  // One of each kind of arithmetic: f32, f64 with the division of avg, integers, and a
  // half type that reduces in f32 and rounds.
  const TypeOp pairs[] = {{DataType::f32, ReduceOp::sum}, {DataType::f64, ReduceOp::avg},
                          {DataType::i32, ReduceOp::max}, {DataType::f16, ReduceOp::sum}};
  const std::size_t sizes[] = {0, 1, 7, static_cast<std::size_t>(1000 + p), 20011};
  std::vector<Case> out;
  for (auto k : kinds)
    for (std::size_t i = 0; i < std::size(pairs); ++i)
      for (std::size_t j = 0; j < std::size(sizes); ++j)
        if (a.supports(k, pairs[i].dt, sizes[j], shape))
          out.push_back({k, pairs[i].dt, pairs[i].op, sizes[j], static_cast<int>(i + j) % p, (i + j) % 2 == 1});
  // One large case per collective: hundreds of chunks in flight.
  for (std::size_t i = 0; i < std::size(kinds); ++i)
    if (a.supports(kinds[i], DataType::f32, (1u << 18) + 5, shape))
      out.push_back({kinds[i], DataType::f32, ReduceOp::sum, (1u << 18) + 5, static_cast<int>(i) % p, i % 2 == 1});
  return out;
}

class Registry : public ::testing::TestWithParam<Param> {};

TEST_P(Registry, MatchReference) {
  const auto prm = GetParam();
  const Algorithm* a = collectives::find_algorithm(prm.algorithm);
  ASSERT_NE(a, nullptr);
  const std::string root = free_root_address();
  auto results = fork_ranks(prm.ranks, std::chrono::seconds(120), [&](int rank) {
    ::setenv("STRATA_CHUNK_BYTES", "4096", 1);  // several chunks from 1000 + p elements up
    ::setenv("STRATA_TIMEOUT_S", "60", 1);
    CommOptions opts;
    opts.transport = prm.transport;
    Communicator comm(rank, prm.ranks, root, opts);
    CallOptions o;
    o.algorithm = prm.algorithm;
    // Forked ranks of one host share a segment (shared_memory).
    const collectives::GroupShape shape(prm.ranks, 0, true);
    run_all(comm, algorithm_cases(*a, shape), o);
    if (a->supports(CollectiveKind::barrier, DataType::u8, 0, prm.ranks))
      check_barrier(comm, o);
  });
  EXPECT_EQ(failures(results), "");
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (const auto& a : collectives::algorithms()) {
    // Algorithms that need dedicated servers have their own suite (test_param_server.cpp).
    bool runs = false;
    for (auto k : {CollectiveKind::allreduce, CollectiveKind::reduce_scatter, CollectiveKind::allgather,
                   CollectiveKind::broadcast, CollectiveKind::reduce, CollectiveKind::barrier})
      runs = runs || a.supports(k, DataType::f32, 1, {2, 0, true});
    if (!runs) continue;
    for (auto t : {TransportKind::tcp, TransportKind::ucx})
      for (int n = 1; n <= 6; ++n) out.push_back({a.name, t, n});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Algorithms, Registry, ::testing::ValuesIn(params()), [](const auto& info) {
  return info.param.algorithm + "_" + to_string(info.param.transport) + "_" +
         std::to_string(info.param.ranks) + "ranks";
});

// A name that is not registered, or one that does not implement the collective, is a bad
// argument: refused before anything is sent, naming the collective, the rank and the
// valid choices, and the communicator stays usable.
TEST(AlgorithmsOverride, RejectsUnknownAndUnsupportedNames) {
  const std::string root = free_root_address();
  auto results = fork_ranks(1, std::chrono::seconds(60), [&](int rank) {
    Communicator comm(rank, 1, root, CommOptions{TransportKind::tcp, {}});
    float x = 1, y = 0;
    CallOptions o;
    o.algorithm = "no_such_algorithm";
    std::string msg;
    try {
      comm.allreduce(&x, &y, 1, DataType::f32, ReduceOp::sum, o);
    } catch (const InvalidArgument& e) {
      msg = e.what();
    }
    require(msg.find("allreduce on rank 0") != std::string::npos, "unknown: " + msg);
    require(msg.find("'no_such_algorithm'") != std::string::npos, "unknown: " + msg);
    require(msg.find(collectives::algorithm_names()) != std::string::npos, "unknown: " + msg);

    o.algorithm = "ring";
    msg.clear();
    try {
      comm.broadcast(&x, &y, 1, DataType::f32, 0, o);
    } catch (const InvalidArgument& e) {
      msg = e.what();
    }
    require(msg.find("broadcast on rank 0") != std::string::npos, "unsupported: " + msg);
    require(msg.find("'ring' does not support broadcast") != std::string::npos, "unsupported: " + msg);
    require(msg.find("chain") != std::string::npos, "unsupported: " + msg);

    o.algorithm = "direct";
    comm.allreduce(&x, &y, 1, DataType::f32, ReduceOp::sum, o).wait();
    require(y == 1, "allreduce after the refused calls");
  });
  EXPECT_EQ(failures(results), "");
}

// Ranks that force different algorithms for one call disagree about the messages; the
// fingerprint names the disagreement instead of letting them hang or corrupt data.
TEST(AlgorithmsOverride, RanksNamingDifferentAlgorithmsGetAMismatch) {
  const std::string root = free_root_address();
  auto results = fork_ranks(3, std::chrono::seconds(60), [&](int rank) {
    ::setenv("STRATA_TIMEOUT_S", "20", 1);
    Communicator comm(rank, 3, root, CommOptions{TransportKind::tcp, {}});
    std::vector<float> v(4096, 1.0f);
    CallOptions o;
    o.algorithm = rank == 1 ? "direct" : "ring";
    try {
      comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum, o).wait();
    } catch (const MismatchError&) {
      return;
    } catch (const Error&) {
      return;  // a rank not next to rank 1 may see the abort that follows the mismatch
    }
    throw std::runtime_error("different algorithms went unnoticed on rank " + std::to_string(rank));
  });
  EXPECT_EQ(failures(results), "");
}

// shared_memory needs every rank of the host on the segment: one rank that turns it off
// (STRATA_SHARED_MEMORY=0) turns it off for all of them, so none waits for the others, and
// a forced call is refused on every rank with a reason.
TEST(AlgorithmsOverride, SharedMemoryOnlyWhereEveryRankSharesMemory) {
  for (const bool tcp : {true, false}) {
    const std::string root = free_root_address();
    auto results = fork_ranks(3, std::chrono::seconds(60), [&](int rank) {
      ::setenv("STRATA_TIMEOUT_S", "20", 1);
      if (rank == 2) ::setenv("STRATA_SHARED_MEMORY", "0", 1);
      Communicator comm(rank, 3, root, CommOptions{tcp ? TransportKind::tcp : TransportKind::ucx, {}});
      std::vector<float> v(1000, 1.0f);
      CallOptions o;
      o.algorithm = "shared_memory";
      std::string msg;
      try {
        comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum, o).wait();
      } catch (const InvalidArgument& e) {
        msg = e.what();
      }
      require(msg.find("allreduce on rank " + std::to_string(rank)) != std::string::npos, "refusal: " + msg);
      require(msg.find("do not share memory") != std::string::npos, "refusal: " + msg);
      o.algorithm.clear();
      comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum, o).wait();
      require(v[0] == 3.0f && v[999] == 3.0f, "allreduce after the refusal");
    });
    EXPECT_EQ(failures(results), "") << (tcp ? "tcp" : "ucx");
  }
}

// shared_memory moves vectors through the host's segment one slot-sized piece at a time
// (4 MiB per rank): vectors of several pieces, with a short last one and blocks of
// unequal sizes, in and out of place, against the reference.
TEST(AlgorithmsOverride, SharedMemorySpansSeveralPieces) {
  const std::string root = free_root_address();
  auto results = fork_ranks(3, std::chrono::seconds(120), [&](int rank) {
    ::setenv("STRATA_TIMEOUT_S", "60", 1);
    Communicator comm(rank, 3, root, CommOptions{TransportKind::ucx, {}});
    CallOptions o;
    o.algorithm = "shared_memory";
    run_all(comm,
            {{CollectiveKind::allreduce, DataType::f32, ReduceOp::sum, 2'500'001, 0, true},
             {CollectiveKind::allreduce, DataType::f64, ReduceOp::avg, 1'048'583, 0, false},
             {CollectiveKind::reduce_scatter, DataType::f32, ReduceOp::max, 1'000'003, 0, true},
             {CollectiveKind::allgather, DataType::i32, ReduceOp::sum, 1'500'001, 0, false}},
            o);
  });
  EXPECT_EQ(failures(results), "");
}

}  // namespace
}  // namespace strata::test
