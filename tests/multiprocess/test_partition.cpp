// A real partition (issue 34): five ranks in two regions, each region in a network
// namespace of its own; the link between them is cut for longer than the heartbeat while
// both sides keep calling allreduce. The three ranks of region a shrink and go on; the
// two of region b are no majority and get QuorumLostError. Once the link is back, the two
// rejoin the three through grow() in a store both can reach, take the model with
// share_state, and the next allreduce is exact on all five.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/job_secret.hpp"
#include "bootstrap/tcp_store.hpp"
#include "fork_ranks.hpp"
#include "netns.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 5, kMajority = 3;
constexpr int kStoreChild = kRanks, kOperator = kRanks + 1;

struct Shared {
  std::atomic<int> steps[kRanks];
  std::atomic<int> cut{0}, healed{0}, quorum_lost{0}, went_on_steps{0}, done{0};
};

Shared* shared_page() {
  void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
  return new (p) Shared{};
}

template <class Pred>
void wait_until(Pred pred, std::chrono::seconds limit, const std::string& what) {
  const auto t0 = Clock::now();
  while (!pred()) {
    require(Clock::now() - t0 < limit, "waited in vain for " + what);
    std::this_thread::sleep_for(10ms);
  }
}

// The model every rank of the communicator adds the same step to: a rank whose result
// is wrong, or a replica that drifted, shows in the digest.
void exact_step(Communicator& comm, int step, std::vector<double>& model) {
  std::vector<double> v(model.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i + 3 * step + 5 * comm.rank()) % 11);
  comm.allreduce(v.data(), v.data(), v.size(), DataType::f64, ReduceOp::sum).wait();
  for (std::size_t i = 0; i < v.size(); ++i) {
    double want = 0;
    for (int r = 0; r < comm.size(); ++r) want += static_cast<double>((i + 3 * step + 5 * r) % 11);
    require(v[i] == want, "step " + std::to_string(step) + " element " + std::to_string(i) + " is wrong");
    model[i] += v[i];
  }
}

// After a PeerLostError: the lost ranks once the mesh stops finding more.
std::vector<int> settled_losses(Communicator& comm) {
  auto lost = comm.lost_ranks();
  for (auto stable = Clock::now(); Clock::now() - stable < 1s; std::this_thread::sleep_for(50ms))
    if (auto now = comm.lost_ranks(); now != lost) {
      lost = now;
      stable = Clock::now();
    }
  return lost;
}

TEST(Partition, OnlyTheMajorityGoesOnAndTheOthersRejoinThroughGrow) {
  if (const auto why = NetnsPair::unavailable(); !why.empty()) GTEST_SKIP() << why;
  const NetnsPair net;
  Shared* sh = shared_page();
  const int port = 29000 + ::getpid() % 1000;  // any port is free in a new namespace
  const std::string root = net.address(0) + ":" + std::to_string(port);
  const std::string rejoin_store = net.address(0) + ":" + std::to_string(port + 1000);
  auto rs = fork_ranks(kRanks + 2, 150s, [&](int r) {
    ::setenv("STRATA_JOB_SECRET", "partition test", 1);
    ::setenv("STRATA_HEARTBEAT_S", "2", 1);
    if (r == kOperator) {  // the hand that cuts the link and mends it
      wait_until([&] {
        for (auto& s : sh->steps)
          if (s.load() < 10) return false;
        return true;
      }, 60s, "ten steps");
      net.cut(true);
      sh->cut.store(1);
      std::printf("CUT\n");
      std::fflush(stdout);
      wait_until([&] { return sh->quorum_lost.load() == kRanks - kMajority && sh->went_on_steps.load() >= 10; }, 60s,
                 "one side to stop and the other to go on");
      net.cut(false);
      sh->healed.store(1);
      std::printf("HEALED\n");
      std::fflush(stdout);
      return;
    }
    net.enter(r < kMajority || r == kStoreChild ? 0 : 1);
    if (r == kStoreChild) {  // the store the two sides meet in again; it outlives every rank
      bootstrap::StoreServer store(net.address(0), static_cast<std::uint16_t>(port + 1000),
                                   bootstrap::JobSecret::from_text("partition test"));
      wait_until([&] { return sh->done.load() == kRanks; }, 140s, "every rank to finish");
      return;
    }
    ::setenv("STRATA_REGION", r < kMajority ? "a" : "b", 1);
    if (std::getenv("PARTITION_DEBUG")) ::setenv("STRATA_DEBUG", "INFO", 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    o.timeout = 20s;
    std::optional<Communicator> comm;
    comm.emplace(r, kRanks, root, o);
    std::vector<double> model(10007, 0.0);
    int step = 0;
    bool rejoin_as_new = false;
    for (;;) {
      try {
        exact_step(*comm, step, model);
        ++step;
        if (comm->size() == kRanks) sh->steps[r].store(step);
        else sh->went_on_steps.fetch_add(r == 0 ? 1 : 0);
        // The ranks that went on agree on when to stop: each seeing the flag on its own
        // could leave one in grow() while another takes one more step.
        if (comm->size() == kMajority) {
          std::int32_t healed = sh->healed.load();
          comm->allreduce(&healed, &healed, 1, DataType::i32, ReduceOp::max).wait();
          if (healed != 0) break;
        }
        std::this_thread::sleep_for(50ms);
      } catch (const PeerLostError&) {
        require(sh->cut.load() == 1, "a rank was lost before the link was cut");
        // As an application would: shrink by the ranks found lost, and again if one more
        // is found while shrinking.
        std::optional<Communicator> smaller;
        try {
          for (int attempt = 0; !smaller; ++attempt) {
            const auto lost = settled_losses(*comm);
            try {
              smaller.emplace(comm->shrink(lost, o));
              std::printf("WENT ON with %d ranks after losing %zu\n", smaller->size(), lost.size());
            } catch (const PeerLostError&) {
              require(attempt < 3, "the shrink kept losing ranks");
            }
          }
        } catch (const QuorumLostError& e) {
          std::printf("QUORUM LOST %s\n", e.what());
          sh->quorum_lost.fetch_add(1);
          rejoin_as_new = true;
          break;
        }
        comm.emplace(std::move(*smaller));
      }
    }
    auto store = connect_store(rejoin_store);
    if (rejoin_as_new) {
      comm.reset();
      wait_until([&] { return sh->healed.load() == 1; }, 90s, "the link to come back");
      comm.emplace(Communicator::join(store, -1, kRanks, "rejoin-1", o));
    } else {
      comm.emplace(comm->grow(store, kRanks, "rejoin-1", o));
    }
    // The joiners take the model and the step from the ranks that went on.
    std::int64_t at = step;
    const std::span<std::byte> state[] = {std::as_writable_bytes(std::span(model)),
                                          std::as_writable_bytes(std::span(&at, 1))};
    std::printf("DIGEST %s\n", comm->share_state(state, 0).c_str());
    step = static_cast<int>(at);
    exact_step(*comm, step, model);
    std::printf("REJOINED as rank %d of %d\n", comm->rank(), comm->size());
    sh->done.fetch_add(1);
  });
  EXPECT_EQ(failures(rs), "");
  for (int r = 0; r < kRanks; ++r) {
    const auto& out = rs[static_cast<std::size_t>(r)].output;
    if (r < kMajority) {
      EXPECT_NE(out.find("WENT ON with 3 ranks after losing 2"), std::string::npos) << "rank " << r << ": " << out;
      EXPECT_EQ(out.find("QUORUM LOST"), std::string::npos) << "rank " << r << ": " << out;
    } else {
      EXPECT_NE(out.find("QUORUM LOST shrink on rank " + std::to_string(r) + ": 2 of the 5 ranks take part"),
                std::string::npos) << "rank " << r << ": " << out;
      EXPECT_EQ(out.find("WENT ON"), std::string::npos) << "rank " << r << ": " << out;
    }
    EXPECT_NE(out.find("REJOINED as rank"), std::string::npos) << "rank " << r << ": " << out;
    const auto digest = [](const std::string& o) { return o.substr(o.find("DIGEST "), 7 + 64); };
    if (out.find("DIGEST ") != std::string::npos && rs[0].output.find("DIGEST ") != std::string::npos) {
      EXPECT_EQ(digest(out), digest(rs[0].output));
    }
  }
  ::munmap(sh, sizeof(Shared));
}

}  // namespace
}  // namespace strata::test
