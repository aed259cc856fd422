// Settings are checked at creation on every rank and agreed across ranks before anything
// waits on them: a rank that refuses its own settings, or ranks that set a shared one
// differently, fail every rank within seconds, naming the setting, its value and the rank.
// Before, the others waited the whole STRATA_TIMEOUT_S for a rank 0 that had already
// given up, and absurd values passed creation to fail every collective later.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Three ranks over TCP; `env(rank)` sets what that rank's environment differs in. Every
// rank must fail creation with InvalidArgument; returns the ranks' outputs.
std::vector<RankResult> refused(const std::function<void(int)>& env) {
  const auto root = free_root_address();
  const auto t0 = Clock::now();
  auto rs = fork_ranks(3, 60s, [&](int r) {
    env(r);
    CommOptions o;
    o.transport = TransportKind::tcp;
    o.timeout = 60s;
    try {
      Communicator comm(r, 3, root, o);
    } catch (const InvalidArgument& e) {
      std::printf("REFUSED %s\n", e.what());
      return;
    }
    throw std::runtime_error("creation passed");
  });
  EXPECT_LT(Clock::now() - t0, 20s) << "the ranks waited for one that had given up";
  EXPECT_EQ(failures(rs), "");
  return rs;
}

void expect_all(const std::vector<RankResult>& rs, const std::string& text) {
  for (const auto& r : rs) EXPECT_NE(r.output.find(text), std::string::npos) << "rank " << r.rank << ": " << r.output;
}

TEST(Settings, ARankRefusingItsHeartbeatFailsEveryRankAtOnce) {
  auto rs = refused([](int r) {
    if (r == 0) ::setenv("STRATA_HEARTBEAT_S", "-5", 1);
  });
  expect_all(rs, "STRATA_HEARTBEAT_S=-5 is outside [0, 86400]");
  EXPECT_NE(rs[0].output.find("this rank refuses its settings"), std::string::npos) << rs[0].output;
  EXPECT_NE(rs[2].output.find("rank 0 refuses its settings"), std::string::npos) << rs[2].output;
}

TEST(Settings, AbsurdHeartbeatAndSegmentAreRefused) {
  auto rs = refused([](int) { ::setenv("STRATA_HEARTBEAT_S", "0.001", 1); });
  expect_all(rs, "STRATA_HEARTBEAT_S=0.001 is too short: 0 (no heartbeats) or at least 1 s");
  rs = refused([](int r) {
    if (r == 1) ::setenv("STRATA_SEGMENT_BYTES", "0", 1);
  });
  expect_all(rs, "STRATA_SEGMENT_BYTES=0 is outside [4096, ");
}

TEST(Settings, ASharedSettingThatDiffersFailsEveryRank) {
  auto rs = refused([](int r) {
    if (r == 2) ::setenv("STRATA_CHUNK_BYTES", "65536", 1);
  });
  expect_all(rs, "STRATA_CHUNK_BYTES differs between ranks: 1048576 on ");
  expect_all(rs, "65536 on ");
  EXPECT_NE(rs[0].output.find("65536 on rank 2; every rank must set it alike"), std::string::npos) << rs[0].output;
}

// A renamed or misspelt variable used to be ignored without a word.
TEST(Settings, AVariableNothingReadsIsNamedAtCreation) {
  const auto root = free_root_address();
  auto rs = fork_ranks(1, 60s, [&](int) {
    ::setenv("STRATA_SINGLE_COPY", "0", 1);
    ::setenv("STRATA_HEARTBEAT", "2", 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    Communicator comm(0, 1, root, o);
    Communicator again(0, 1, free_root_address(), o);  // warned once per process, not per communicator
  });
  ASSERT_EQ(failures(rs), "");
  const auto& out = rs[0].output;
  EXPECT_NE(out.find("STRATA_SINGLE_COPY is set but strata reads no such variable: it was renamed STRATA_SHARED_MEMORY"),
            std::string::npos) << out;
  EXPECT_NE(out.find("STRATA_HEARTBEAT is set but strata reads no such variable; did you mean STRATA_HEARTBEAT_S?"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("STRATA_HEARTBEAT is set"), out.rfind("STRATA_HEARTBEAT is set")) << out;
}

}  // namespace
}  // namespace strata::test
