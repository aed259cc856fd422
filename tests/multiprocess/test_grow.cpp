// Growing a running job: three ranks meet in a store that is not theirs (it outlives
// any of them, as strata-store does), train a little, and grow to four; the fourth
// process joins, takes the next free rank, receives the model by share_state (every
// rank compares its SHA-256), and the next allreduce over four ranks is exact.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <new>
#include <thread>
#include <cstdio>
#include <string>
#include <vector>

#include "fork_ranks.hpp"
#include "store_process.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;

TEST(Grow, ThreeRanksGrowToFourAndTheJoinerGetsTheModel) {
  const StoreProcess store;  // the store outlives every rank
  const UniqueId& id = store.id();
  auto rs = fork_ranks(4, 90s, [&](int p) {
    CommOptions o;
    o.transport = TransportKind::tcp;
    o.timeout = 30s;
    auto store = connect_store(id);
    std::vector<double> model(100003, 0.0);
    if (p < 3) {
      Communicator three(store, p, 3, o);
      // A few steps that every rank ends with the same model.
      for (int step = 0; step < 3; ++step) {
        std::vector<double> grad(model.size());
        for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<double>((i + 7 * step + 11 * p) % 97);
        three.allreduce(grad.data(), grad.data(), grad.size(), DataType::f64, ReduceOp::sum).wait();
        for (std::size_t i = 0; i < model.size(); ++i) model[i] += grad[i];
      }
      Communicator four = three.grow(store, 4, "grow-1", o);
      require(four.rank() == p && four.size() == 4, "an old rank moved");
      const std::span<std::byte> bufs[] = {std::as_writable_bytes(std::span(model))};
      std::printf("DIGEST %s\n", four.share_state(bufs, 0, true).c_str());
      std::vector<std::int64_t> v(777, four.rank() + 1);
      four.allreduce(v.data(), v.data(), v.size(), DataType::i64, ReduceOp::sum).wait();
      require(v[0] == 10 && v[776] == 10, "the grown allreduce gave " + std::to_string(v[0]));
      return;
    }
    Communicator four = Communicator::join(store, -1, 4, "grow-1", o);
    require(four.rank() == 3 && four.size() == 4, "the joiner is rank " + std::to_string(four.rank()));
    const std::span<std::byte> bufs[] = {std::as_writable_bytes(std::span(model))};
    std::printf("DIGEST %s\n", four.share_state(bufs, 0, true).c_str());
    // What the three computed: the sum over steps and ranks of their gradients.
    for (std::size_t i = 0; i < model.size(); ++i) {
      double want = 0;
      for (int step = 0; step < 3; ++step)
        for (int q = 0; q < 3; ++q) want += static_cast<double>((i + 7 * step + 11 * q) % 97);
      require(model[i] == want, "the joiner's model differs at " + std::to_string(i));
    }
    std::vector<std::int64_t> v(777, four.rank() + 1);
    four.allreduce(v.data(), v.data(), v.size(), DataType::i64, ReduceOp::sum).wait();
    require(v[0] == 10, "the grown allreduce gave " + std::to_string(v[0]) + " on the joiner");
  });
  ASSERT_EQ(failures(rs), "");
  const auto digest = [](const std::string& out) { return out.substr(out.find("DIGEST "), 7 + 64); };
  for (const auto& r : rs) EXPECT_EQ(digest(r.output), digest(rs[0].output)) << r.output;
}

// A joiner that dies while the ranks gather is named within seconds and its place goes to
// a replacement of the same generation. Before, everyone waited STRATA_TIMEOUT_S and the
// replacement was told it had no place.
TEST(Grow, AJoinerThatDiesIsReplacedInTheSameGeneration) {
  const StoreProcess store;
  const UniqueId& id = store.id();
  struct Shared {
    std::atomic<int> killed{0};
  };
  auto* sh = new (::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) Shared;
  constexpr int kOld = 3, kNew = 5;
  auto rs = fork_ranks(6, 90s, [&](int p) {
    CommOptions o;
    o.transport = TransportKind::tcp;
    o.timeout = 30s;
    auto store = connect_store(id);
    if (p < kOld) {
      Communicator old(store, p, kOld, o);
      const auto t0 = std::chrono::steady_clock::now();
      Communicator grown = old.grow(store, kNew, "grow-2", o);
      const auto took = std::chrono::steady_clock::now() - t0;
      std::int64_t v = grown.rank() + 1;
      grown.allreduce(&v, &v, 1, DataType::i64, ReduceOp::sum).wait();
      require(v == 15, "the grown allreduce gave " + std::to_string(v));
      std::printf("GROWN in %lld ms\n", static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
      return;
    }
    if (p == 4) {  // claims a place, then dies without a word while it waits for the others
      std::thread killer([&] {
        auto own = connect_store(id);  // a store client is not shared between threads
        while (own->add("grow/grow-2/place/3/claims/0", 0) == 0) std::this_thread::sleep_for(10ms);
        std::this_thread::sleep_for(600ms);  // a beat or two first
        sh->killed.store(1);
        ::kill(::getpid(), SIGKILL);
      });
      Communicator::join(store, -1, kNew, "grow-2", o);
      throw std::runtime_error("the joiner meant to die got a communicator");
    }
    // The other joiner and the replacement come once the first joiner is dead, so that it
    // dies while the others gather.
    while (sh->killed.load() == 0) std::this_thread::sleep_for(10ms);
    Communicator grown = Communicator::join(store, -1, kNew, "grow-2", o);
    std::int64_t v = grown.rank() + 1;
    grown.allreduce(&v, &v, 1, DataType::i64, ReduceOp::sum).wait();
    require(v == 15, "the grown allreduce gave " + std::to_string(v) + " on joiner rank " + std::to_string(grown.rank()));
    std::printf("JOINED as rank %d\n", grown.rank());
  });
  EXPECT_EQ(rs[4].exit_code, -1) << "the joiner meant to die: " << rs[4].output;
  for (int p : {0, 1, 2, 3, 5}) EXPECT_EQ(rs[static_cast<std::size_t>(p)].exit_code, 0) << "process " << p << ": " << rs[static_cast<std::size_t>(p)].output;
  EXPECT_NE(rs[0].output.find("has shown no sign of life for 3."), std::string::npos) << rs[0].output;
  EXPECT_NE(rs[5].output.find("JOINED as rank"), std::string::npos) << rs[5].output;
  const auto at = rs[0].output.find("GROWN in ");
  ASSERT_NE(at, std::string::npos) << rs[0].output;
  EXPECT_LT(std::stoll(rs[0].output.substr(at + 9)), 15000) << "the others waited for the dead joiner";
  ::munmap(sh, sizeof(Shared));
}

TEST(Grow, RanksThatDisagreeOnTheNewSizeFail) {
  const StoreProcess store;
  const UniqueId& id = store.id();
  auto rs = fork_ranks(2, 60s, [&](int p) {
    CommOptions o;
    o.transport = TransportKind::tcp;
    o.timeout = 10s;
    auto store = connect_store(id);
    Communicator two(store, p, 2, o);
    try {
      two.grow(store, p == 0 ? 3 : 4, "grow-x", o);
      throw std::runtime_error("grow with different sizes passed");
    } catch (const MismatchError& e) {
      std::printf("MISMATCH %s\n", e.what());
    }
    try {
      two.grow(store, 1, "grow-y", o);
      throw std::runtime_error("grow to fewer ranks passed");
    } catch (const InvalidArgument& e) {
      std::printf("SMALLER %s\n", e.what());
    }
  });
  ASSERT_EQ(failures(rs), "");
  for (const auto& r : rs) {
    EXPECT_NE(r.output.find("MISMATCH grow on rank"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("is smaller than the 2 ranks already here"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace strata::test
