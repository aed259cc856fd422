// Failures must surface as clear errors within the deadline, never as hangs: mismatched
// collectives, a rank that never joins, a rank that stops answering or dies, abort().
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <regex>
#include <thread>

#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;

// Prints "ERROR <code>: <message>" for the parent to inspect; throws if nothing failed.
template <class F>
void expect_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    std::cout << "ERROR " << to_string(e.code()) << ": " << e.what() << std::endl;
    return;
  }
  throw std::runtime_error("expected a strata::Error, the call succeeded");
}

std::string joined(const std::vector<RankResult>& rs) {
  std::string all;
  for (const auto& r : rs) all += r.output + "\n";
  return all;
}

class Failures : public ::testing::TestWithParam<TransportKind> {
 protected:
  Communicator make(int rank, int size, const std::string& root, double timeout_s = 3) {
    CommOptions o;
    o.transport = GetParam();
    o.timeout = std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
    return Communicator(rank, size, root, o);
  }
  // Three ranks; rank 1 calls `odd`, the others `even`; every rank must fail with a
  // mismatch (whichever neighbour saw it tells the rest), and some message match `want`.
  void mismatch(const std::function<void(Communicator&)>& even,
                const std::function<void(Communicator&)>& odd, const std::string& want) {
    const auto root = free_root_address();
    auto rs = fork_ranks(3, 30s, [&](int r) {
      auto comm = make(r, 3, root);
      expect_error([&] { (r == 1 ? odd : even)(comm); });
    });
    ASSERT_EQ(failures(rs), "");
    for (const auto& r : rs) EXPECT_NE(r.output.find("ERROR collective mismatch"), std::string::npos) << joined(rs);
    EXPECT_TRUE(std::regex_search(joined(rs), std::regex(want))) << joined(rs);
  }
};

std::vector<float> buf(std::size_t n) { return std::vector<float>(n, 1.0f); }

TEST_P(Failures, MismatchedCountNamesBothRanks) {
  mismatch([](Communicator& c) { auto b = buf(11); c.allreduce(b.data(), b.data(), 11, DataType::f32, ReduceOp::sum).wait(); },
           [](Communicator& c) { auto b = buf(10); c.allreduce(b.data(), b.data(), 10, DataType::f32, ReduceOp::sum).wait(); },
           // Rank 2 sees rank 1's, or rank 1 sees rank 0's (the ring check); or, where a
           // one-round algorithm compares every peer's stamp, rank 0 sees rank 1's.
           R"(collective mismatch: rank (2 called allreduce #0 \(f32 x 11, sum\) but rank 1 called allreduce #0 \(f32 x 10, sum\))"
           R"(|1 called allreduce #0 \(f32 x 10, sum\) but rank 0 called allreduce #0 \(f32 x 11, sum\))"
           R"(|0 called allreduce #0 \(f32 x 11, sum\) but rank 1 called allreduce #0 \(f32 x 10, sum\)))");
}

TEST_P(Failures, MismatchedLargeCount) {
  mismatch([](Communicator& c) { auto b = buf(300001); c.allreduce(b.data(), b.data(), 300001, DataType::f32, ReduceOp::sum).wait(); },
           [](Communicator& c) { auto b = buf(300000); c.allreduce(b.data(), b.data(), 300000, DataType::f32, ReduceOp::sum).wait(); },
           "collective mismatch");
}

TEST_P(Failures, MismatchedOpIsNotSilent) {
  mismatch([](Communicator& c) { auto b = buf(8); c.allreduce(b.data(), b.data(), 8, DataType::f32, ReduceOp::sum).wait(); },
           [](Communicator& c) { auto b = buf(8); c.allreduce(b.data(), b.data(), 8, DataType::f32, ReduceOp::max).wait(); },
           R"(rank 1 called allreduce #0 \(f32 x 8, max\))");
}

TEST_P(Failures, MismatchedKind) {
  mismatch([](Communicator& c) { auto b = buf(8); c.allreduce(b.data(), b.data(), 8, DataType::f32, ReduceOp::sum).wait(); },
           [](Communicator& c) { auto b = buf(8); c.broadcast(b.data(), b.data(), 8, DataType::f32, 0).wait(); },
           "broadcast #0");
}

TEST_P(Failures, MismatchedOrder) {
  auto ar = [](Communicator& c) { auto b = buf(4); c.allreduce(b.data(), b.data(), 4, DataType::f32, ReduceOp::sum).wait(); };
  auto bc = [](Communicator& c) { auto b = buf(4); c.broadcast(b.data(), b.data(), 4, DataType::f32, 0).wait(); };
  mismatch([&](Communicator& c) { ar(c); bc(c); }, [&](Communicator& c) { bc(c); ar(c); }, "collective mismatch");
}

// The root of a broadcast only sends, and its ring neighbour (rank 2) agrees with it; it
// must still fail with the others, not return success and learn at its next call.
TEST_P(Failures, MismatchedBroadcastFailsTheRootToo) {
  mismatch([](Communicator& c) { auto b = buf(9); c.broadcast(b.data(), b.data(), 9, DataType::f32, 0).wait(); },
           [](Communicator& c) { auto b = buf(8); c.broadcast(b.data(), b.data(), 8, DataType::f32, 0).wait(); },
           R"(rank 1 called broadcast #0 \(f32 x 8, root 0\))");
}

TEST_P(Failures, RankThatNeverJoinsIsNamed) {
  const auto root = free_root_address();
  const auto t0 = std::chrono::steady_clock::now();
  auto rs = fork_ranks(3, 30s, [&](int r) {
    if (r == 2) return;  // never creates its communicator
    expect_error([&] { make(r, 3, root, 2); });
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 15s);
  ASSERT_EQ(failures(rs), "");
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(rs[r].output.find("rank(s) 2 of 3 did not join"), std::string::npos) << rs[r].output;
}

TEST_P(Failures, SilentRankTimesOutNamingIt) {
  const auto root = free_root_address();
  auto rs = fork_ranks(3, 30s, [&](int r) {
    auto comm = make(r, 3, root, 2);
    if (r == 2) {
      std::this_thread::sleep_for(5s);
      return;
    }
    expect_error([&] { auto b = buf(1000); comm.allreduce(b.data(), b.data(), 1000, DataType::f32, ReduceOp::sum).wait(); });
  });
  ASSERT_EQ(failures(rs), "");
  const auto all = joined(rs);
  EXPECT_NE(all.find("ERROR timeout: allreduce #0"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 2 has not started allreduce #0"), std::string::npos) << all;
}

TEST_P(Failures, DeadRankFailsTheOthers) {
  const auto root = free_root_address();
  const auto t0 = std::chrono::steady_clock::now();
  auto rs = fork_ranks(3, 30s, [&](int r) {
    auto comm = make(r, 3, root, 4);
    auto b = buf(1 << 18);
    if (r == 2) {
      comm.allreduce(b.data(), b.data(), b.size(), DataType::f32, ReduceOp::sum).wait();
      ::_exit(0);  // dies without a word, maybe before the others have finished that allreduce
    }
    expect_error([&] {
      for (int i = 0; i < 4; ++i) comm.allreduce(b.data(), b.data(), b.size(), DataType::f32, ReduceOp::sum).wait();
    });
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  ASSERT_EQ(failures(rs), "");
  EXPECT_NE(joined(rs).find("rank 2"), std::string::npos) << joined(rs);
}

TEST_P(Failures, AbortWakesAWaitingCollective) {
  const auto root = free_root_address();
  auto rs = fork_ranks(2, 30s, [&](int r) {
    auto comm = make(r, 2, root, 20);
    if (r == 1) {
      std::this_thread::sleep_for(3s);
      return;
    }
    auto b = buf(100);
    auto w = comm.allreduce(b.data(), b.data(), 100, DataType::f32, ReduceOp::sum);
    std::thread t([&] { std::this_thread::sleep_for(200ms); comm.abort(); });
    const auto t0 = std::chrono::steady_clock::now();
    expect_error([&] { w.wait(); });
    t.join();
    require(std::chrono::steady_clock::now() - t0 < 2s, "abort took too long");
    // Later calls fail fast instead of hanging.
    expect_error([&] { comm.barrier().wait(); });
  });
  ASSERT_EQ(failures(rs), "");
  EXPECT_NE(rs[0].output.find("ERROR aborted"), std::string::npos) << rs[0].output;
}

TEST_P(Failures, WaitForReturnsFalseThenCompletes) {
  const auto root = free_root_address();
  auto rs = fork_ranks(2, 30s, [&](int r) {
    auto comm = make(r, 2, root, 10);
    if (r == 1) std::this_thread::sleep_for(500ms);
    auto b = buf(16);
    auto w = comm.allreduce(b.data(), b.data(), 16, DataType::f32, ReduceOp::sum);
    if (r == 0) require(!w.wait_for(50ms), "wait_for should have timed out");
    w.wait();
    require(w.test() && b[3] == 2.0f, "allreduce result wrong after wait");
  });
  EXPECT_EQ(failures(rs), "");
}

INSTANTIATE_TEST_SUITE_P(Transports, Failures, ::testing::Values(TransportKind::tcp, TransportKind::ucx),
                         [](const auto& i) { return std::string(to_string(i.param)); });

}  // namespace
}  // namespace strata::test
