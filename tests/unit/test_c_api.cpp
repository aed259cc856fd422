// The C ABI's argument checking, handle checking and error reporting. Needs no peers:
// the communicators here have one rank, whose rendezvous store this process serves.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "strata/strata.h"

namespace {

using ::testing::HasSubstr;

std::string thread_error() { return strataGetLastError(nullptr); }

// What a C caller can pass where an enum is expected: any int.
template <class E>
E from_int(int v) {
  return static_cast<E>(v);
}

template <class H>
H fake_handle(std::uintptr_t v) {
  return reinterpret_cast<H>(v);
}

strataUniqueId filled_id(char byte) {
  strataUniqueId id;
  std::memset(id.internal, byte, sizeof id.internal);
  return id;
}

TEST(CApiErrors, EveryResultHasItsOwnString) {
  std::set<std::string> seen;
  for (int r = 0; r < strataNumResults; ++r) {
    const char* s = strataGetErrorString(static_cast<strataResult_t>(r));
    ASSERT_NE(s, nullptr);
    EXPECT_STRNE(s, "");
    EXPECT_TRUE(seen.insert(s).second) << "duplicate string for " << r << ": " << s;
  }
  EXPECT_THAT(strataGetErrorString(strataInProgress), HasSubstr("progress"));
  EXPECT_THAT(strataGetErrorString(strataMismatch), HasSubstr("mismatch"));
}

TEST(CApiErrors, OutOfRangeResultStillHasAString) {
  for (int r : {-1, int{strataNumResults}, 1000}) {
    const char* s = strataGetErrorString(from_int<strataResult_t>(r));
    ASSERT_NE(s, nullptr);
    EXPECT_THAT(s, HasSubstr("unknown"));
  }
}

TEST(CApiErrors, VersionMatchesHeader) {
  int v = -1;
  ASSERT_EQ(strataGetVersion(&v), strataSuccess);
  EXPECT_EQ(v, STRATA_VERSION_CODE);
  EXPECT_EQ(STRATA_VERSION(1, 2, 3), 10203);
}

TEST(CApiArgs, NullOutPointersAreRejectedWithTheirName) {
  EXPECT_EQ(strataGetVersion(nullptr), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("strataGetVersion: version is NULL"));
  EXPECT_EQ(strataGetUniqueId(nullptr), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("strataGetUniqueId: uniqueId is NULL"));
  EXPECT_EQ(strataCommInitRank(nullptr, 1, filled_id(1), 0), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("strataCommInitRank: comm is NULL"));
  EXPECT_EQ(strataCommInitRankConfig(nullptr, 1, filled_id(1), 0, nullptr), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("strataCommInitRankConfig: comm is NULL"));
  EXPECT_EQ(strataCommInitFromEnv(nullptr), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("strataCommInitFromEnv: comm is NULL"));
}

// Every function that takes a communicator, called with comm == NULL.
std::vector<std::pair<const char*, std::function<strataResult_t(strataComm_t)>>> comm_calls() {
  static float buf[4];
  static int out;
  static strataResult_t async;
  static strataTrafficStats_t traffic = STRATA_TRAFFIC_STATS_INITIALIZER;
  return {
      {"strataCommCount", [](strataComm_t c) { return strataCommCount(c, &out); }},
      {"strataCommUserRank", [](strataComm_t c) { return strataCommUserRank(c, &out); }},
      {"strataCommGetAsyncError",
       [](strataComm_t c) { return strataCommGetAsyncError(c, &async); }},
      {"strataCommGetTraffic", [](strataComm_t c) { return strataCommGetTraffic(c, &traffic); }},
      {"strataCommSetStream", [](strataComm_t c) { return strataCommSetStream(c, nullptr); }},
      {"strataAllReduce",
       [](strataComm_t c) {
         return strataAllReduce(buf, buf, 4, strataFloat, strataSum, c, nullptr);
       }},
      {"strataReduceScatter",
       [](strataComm_t c) {
         return strataReduceScatter(buf, buf, 1, strataFloat, strataSum, c, nullptr);
       }},
      {"strataAllGather",
       [](strataComm_t c) { return strataAllGather(buf, buf, 1, strataFloat, c, nullptr); }},
      {"strataBroadcast",
       [](strataComm_t c) { return strataBroadcast(buf, buf, 4, strataFloat, 0, c, nullptr); }},
      {"strataReduce",
       [](strataComm_t c) {
         return strataReduce(buf, buf, 4, strataFloat, strataSum, 0, c, nullptr);
       }},
      {"strataBarrier", [](strataComm_t c) { return strataBarrier(c, nullptr); }},
      {"strataSend", [](strataComm_t c) { return strataSend(buf, 4, strataFloat, 0, c, nullptr); }},
      {"strataRecv", [](strataComm_t c) { return strataRecv(buf, 4, strataFloat, 0, c, nullptr); }},
      {"strataRecvAny",
       [](strataComm_t c) {
         static int source;
         return strataRecvAny(buf, 4, strataFloat, &source, c, nullptr);
       }},
  };
}

TEST(CApiArgs, NullCommIsRejectedByEveryFunctionThatUsesOne) {
  for (const auto& [name, call] : comm_calls()) {
    EXPECT_EQ(call(nullptr), strataInvalidArgument) << name;
    EXPECT_EQ(thread_error(), std::string(name) + ": comm is NULL");
  }
}

TEST(CApiArgs, StaleOrForeignHandlesAreRejectedNotDereferenced) {
  const auto garbage = fake_handle<strataComm_t>(0xdeadbeef0);
  for (const auto& [name, call] : comm_calls()) {
    EXPECT_EQ(call(garbage), strataInvalidArgument) << name;
    EXPECT_THAT(thread_error(), HasSubstr("not a live communicator")) << name;
  }
  EXPECT_EQ(strataCommDestroy(garbage), strataInvalidArgument);
  EXPECT_EQ(strataCommAbort(garbage), strataInvalidArgument);
  EXPECT_THAT(strataGetLastError(garbage), HasSubstr("not a live communicator"));

  const auto req = fake_handle<strataRequest_t>(0xdeadbeef0);
  int done = 7;
  EXPECT_EQ(strataTest(req, &done), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("strataTest: req is not a live request"));
  EXPECT_EQ(strataWait(req), strataInvalidArgument);
  EXPECT_EQ(strataRequestFree(req), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("strataRequestFree: req is not a live request"));
}

TEST(CApiArgs, ReleasingNullIsANoOp) {
  EXPECT_EQ(strataCommDestroy(nullptr), strataSuccess);
  EXPECT_EQ(strataCommAbort(nullptr), strataSuccess);
  EXPECT_EQ(strataRequestFree(nullptr), strataSuccess);
}

TEST(CApiArgs, NullRequestIsRejected) {
  int done = 0;
  EXPECT_EQ(strataTest(nullptr, &done), strataInvalidArgument);
  EXPECT_EQ(thread_error(), "strataTest: req is NULL");
  EXPECT_EQ(strataWait(nullptr), strataInvalidArgument);
  EXPECT_EQ(thread_error(), "strataWait: req is NULL");
}

TEST(CApiInit, RejectsBadSizeRankAndIdAndClearsTheOutput) {
  struct Case {
    int nranks, rank;
    strataUniqueId id;
    const char* message;
  };
  const Case cases[] = {
      {0, 0, filled_id(1), "nranks is 0"},
      {-3, 0, filled_id(1), "nranks is -3"},
      {2, -1, filled_id(1), "rank -1 is outside [0, 2)"},
      {2, 2, filled_id(1), "rank 2 is outside [0, 2)"},
      {1, 0, filled_id(0), "commId is all zeros"},
  };
  for (const auto& c : cases) {
    strataComm_t comm = fake_handle<strataComm_t>(0x10);
    EXPECT_EQ(strataCommInitRank(&comm, c.nranks, c.id, c.rank), strataInvalidArgument)
        << c.message;
    EXPECT_EQ(comm, nullptr);
    EXPECT_THAT(thread_error(), HasSubstr(c.message));
    EXPECT_THAT(thread_error(), HasSubstr("strataCommInitRank: "));
  }
}

TEST(CApiInit, ForeignIdIsAnInvalidArgument) {
  strataComm_t comm = nullptr;
  EXPECT_EQ(strataCommInitRank(&comm, 1, filled_id('x'), 0), strataInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_THAT(thread_error(), HasSubstr("strataCommInitRank: "));
}

TEST(CApiInit, InitTimesOutWhenAPeerNeverJoins) {
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess) << thread_error();
  strataConfig_t config = STRATA_CONFIG_INITIALIZER;
  config.transport = strataTransportTcp;
  config.timeout_ms = 500;
  strataComm_t comm = nullptr;
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 of 2; rank 0 never comes.
  EXPECT_EQ(strataCommInitRankConfig(&comm, 2, id, 1, &config), strataTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(comm, nullptr);
  EXPECT_THAT(thread_error(), HasSubstr("strataCommInitRankConfig: "));
}

TEST(CApiInit, RejectsBadConfigNamingTheField) {
  strataConfig_t base = STRATA_CONFIG_INITIALIZER;
  EXPECT_EQ(base.size, sizeof(strataConfig_t));
  EXPECT_EQ(base.transport, strataTransportAuto);
  EXPECT_EQ(base.timeout_ms, 0);

  struct Case {
    strataConfig_t config;
    const char* message;
  };
  std::vector<Case> cases;
  cases.push_back({base, "config->size is 0"});
  cases.back().config.size = 0;
  cases.push_back({base, "config->transport 3"});
  cases.back().config.transport = 3;
  cases.push_back({base, "config->transport -1"});
  cases.back().config.transport = -1;
  cases.push_back({base, "config->timeout_ms is -5"});
  cases.back().config.timeout_ms = -5;
  for (const auto& c : cases) {
    strataComm_t comm = nullptr;
    EXPECT_EQ(strataCommInitRankConfig(&comm, 1, filled_id(1), 0, &c.config),
              strataInvalidArgument)
        << c.message;
    EXPECT_EQ(comm, nullptr);
    EXPECT_THAT(thread_error(), HasSubstr(c.message));
  }
}

// One rank; the config keeps every operation bounded in time.
class OneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    strataUniqueId id;
    ASSERT_EQ(strataGetUniqueId(&id), strataSuccess) << thread_error();
    strataConfig_t config = STRATA_CONFIG_INITIALIZER;
    config.transport = strataTransportTcp;
    config.timeout_ms = 20000;
    ASSERT_EQ(strataCommInitRankConfig(&comm_, 1, id, 0, &config), strataSuccess)
        << thread_error();
    ASSERT_NE(comm_, nullptr);
  }
  void TearDown() override {
    if (comm_ != nullptr) {
      EXPECT_EQ(strataCommDestroy(comm_), strataSuccess) << thread_error();
    }
  }

  strataComm_t comm_ = nullptr;
};

TEST_F(OneRank, CountAndRank) {
  int n = -1, r = -1;
  ASSERT_EQ(strataCommCount(comm_, &n), strataSuccess);
  ASSERT_EQ(strataCommUserRank(comm_, &r), strataSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(r, 0);
  EXPECT_EQ(strataCommCount(comm_, nullptr), strataInvalidArgument);
  EXPECT_EQ(thread_error(), "strataCommCount: count is NULL");
  EXPECT_EQ(std::string(strataGetLastError(comm_)), "strataCommCount: count is NULL");
  EXPECT_EQ(strataCommUserRank(comm_, nullptr), strataInvalidArgument);
  EXPECT_EQ(thread_error(), "strataCommUserRank: rank is NULL");
  strataResult_t async = strataInternalError;
  EXPECT_EQ(strataCommGetAsyncError(comm_, nullptr), strataInvalidArgument);
  EXPECT_EQ(thread_error(), "strataCommGetAsyncError: asyncError is NULL");
  ASSERT_EQ(strataCommGetAsyncError(comm_, &async), strataSuccess);
  EXPECT_EQ(async, strataSuccess) << "argument errors do not poison the communicator";
}

// One rank spans no region boundary: nothing crosses a WAN, before or after a collective.
TEST_F(OneRank, TrafficIsZeroWithoutRegions) {
  EXPECT_EQ(strataCommGetTraffic(comm_, nullptr), strataInvalidArgument);
  EXPECT_EQ(thread_error(), "strataCommGetTraffic: stats is NULL");
  float buf[4] = {1, 2, 3, 4};
  ASSERT_EQ(strataAllReduce(buf, buf, 4, strataFloat, strataSum, comm_, nullptr), strataSuccess);
  strataTrafficStats_t t;
  std::memset(&t, 0xff, sizeof t);
  t.size = 0;
  EXPECT_EQ(strataCommGetTraffic(comm_, &t), strataInvalidArgument);
  EXPECT_NE(thread_error().find("STRATA_TRAFFIC_STATS_INITIALIZER"), std::string::npos) << thread_error();
  t.size = sizeof t;
  ASSERT_EQ(strataCommGetTraffic(comm_, &t), strataSuccess) << thread_error();
  EXPECT_EQ(t.wan_bytes_sent, 0u);
  EXPECT_EQ(t.wan_wire_bytes_sent, 0u);
  EXPECT_EQ(t.wan_bytes_received, 0u);
  EXPECT_EQ(t.wan_bytes_resent, 0u);
}

TEST_F(OneRank, OutOfRangeEnumsAreRejectedNamingTheArgument) {
  float buf[4] = {};
  for (int bad : {-1, int{strataNumTypes}, 42}) {
    const auto dt = from_int<strataDataType_t>(bad);
    const std::string named = "datatype " + std::to_string(bad) + " is not a strataDataType_t";
    EXPECT_EQ(strataAllReduce(buf, buf, 4, dt, strataSum, comm_, nullptr), strataInvalidArgument);
    EXPECT_THAT(thread_error(), HasSubstr("strataAllReduce: " + named));
    EXPECT_EQ(strataReduceScatter(buf, buf, 4, dt, strataSum, comm_, nullptr),
              strataInvalidArgument);
    EXPECT_THAT(thread_error(), HasSubstr(named));
    EXPECT_EQ(strataAllGather(buf, buf, 4, dt, comm_, nullptr), strataInvalidArgument);
    EXPECT_THAT(thread_error(), HasSubstr(named));
    EXPECT_EQ(strataBroadcast(buf, buf, 4, dt, 0, comm_, nullptr), strataInvalidArgument);
    EXPECT_THAT(thread_error(), HasSubstr(named));
    EXPECT_EQ(strataReduce(buf, buf, 4, dt, strataSum, 0, comm_, nullptr), strataInvalidArgument);
    EXPECT_THAT(thread_error(), HasSubstr(named));
    EXPECT_EQ(strataSend(buf, 4, dt, 0, comm_, nullptr), strataInvalidArgument);
    EXPECT_THAT(thread_error(), HasSubstr(named));
    EXPECT_EQ(strataRecv(buf, 4, dt, 0, comm_, nullptr), strataInvalidArgument);
    EXPECT_THAT(thread_error(), HasSubstr(named));
  }
  for (int bad : {-1, int{strataNumOps}, 99}) {
    const auto op = from_int<strataRedOp_t>(bad);
    const std::string named = "op " + std::to_string(bad) + " is not a strataRedOp_t";
    EXPECT_EQ(strataAllReduce(buf, buf, 4, strataFloat, op, comm_, nullptr), strataInvalidArgument);
    EXPECT_THAT(thread_error(), HasSubstr(named));
    EXPECT_EQ(strataReduceScatter(buf, buf, 4, strataFloat, op, comm_, nullptr),
              strataInvalidArgument);
    EXPECT_THAT(thread_error(), HasSubstr(named));
    EXPECT_EQ(strataReduce(buf, buf, 4, strataFloat, op, 0, comm_, nullptr), strataInvalidArgument);
    EXPECT_THAT(thread_error(), HasSubstr(named));
  }
  strataResult_t async = strataInternalError;
  ASSERT_EQ(strataCommGetAsyncError(comm_, &async), strataSuccess);
  EXPECT_EQ(async, strataSuccess);
}

TEST_F(OneRank, NullBuffersAreRejectedUnlessCountIsZero) {
  float buf[4] = {};
  EXPECT_EQ(strataAllReduce(nullptr, buf, 4, strataFloat, strataSum, comm_, nullptr),
            strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("sendbuff is NULL but count is 4"));
  EXPECT_EQ(strataAllReduce(buf, nullptr, 4, strataFloat, strataSum, comm_, nullptr),
            strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("recvbuff is NULL"));
  EXPECT_EQ(strataBroadcast(nullptr, buf, 4, strataFloat, 0, comm_, nullptr),
            strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("sendbuff (on root) is NULL"));
  EXPECT_EQ(strataReduce(buf, nullptr, 4, strataFloat, strataSum, 0, comm_, nullptr),
            strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("recvbuff (on root) is NULL"));
  EXPECT_EQ(strataSend(nullptr, 4, strataFloat, 0, comm_, nullptr), strataInvalidArgument);
  EXPECT_EQ(strataRecv(nullptr, 4, strataFloat, 0, comm_, nullptr), strataInvalidArgument);
  EXPECT_EQ(strataRecvAny(buf, 4, strataFloat, nullptr, comm_, nullptr), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("source"));
  EXPECT_EQ(strataAllReduce(nullptr, nullptr, 0, strataFloat, strataSum, comm_, nullptr),
            strataSuccess)
      << thread_error();
}

// The probe's case: on one rank strataAllGather with SIZE_MAX/4 floats returned success
// after a copy of 2^64-4 bytes over the caller's stack. Every collective refuses counts
// no buffer can hold, and blocking and non-blocking calls alike leave the buffers alone.
TEST_F(OneRank, HugeCountsAreInvalidOnEveryCollective) {
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {};
  for (const std::size_t n : {SIZE_MAX / 4, SIZE_MAX / 8 + 1, SIZE_MAX}) {
    strataRequest_t handle = nullptr;
    for (strataRequest_t* req : {static_cast<strataRequest_t*>(nullptr), &handle}) {
      const std::string what = "count " + std::to_string(n) + (req ? ", with a request" : "");
      EXPECT_EQ(strataAllGather(a, b, n, strataFloat, comm_, req), strataInvalidArgument) << what;
      EXPECT_THAT(thread_error(), HasSubstr("strataAllGather: allgather on rank 0: count")) << what;
      EXPECT_THAT(thread_error(), HasSubstr("larger than any buffer can be")) << what;
      EXPECT_EQ(strataAllReduce(a, b, n, strataFloat, strataSum, comm_, req), strataInvalidArgument) << what;
      EXPECT_EQ(strataAllReduce(a, a, n, strataFloat, strataSum, comm_, req), strataInvalidArgument) << what;
      EXPECT_EQ(strataReduceScatter(a, b, n, strataFloat, strataSum, comm_, req), strataInvalidArgument) << what;
      EXPECT_EQ(strataBroadcast(a, b, n, strataFloat, 0, comm_, req), strataInvalidArgument) << what;
      EXPECT_EQ(strataReduce(a, b, n, strataFloat, strataSum, 0, comm_, req), strataInvalidArgument) << what;
      EXPECT_EQ(strataSend(a, n, strataFloat, 0, comm_, req), strataInvalidArgument) << what;
      EXPECT_EQ(strataRecv(b, n, strataFloat, 0, comm_, req), strataInvalidArgument) << what;
      if (req) {
        EXPECT_EQ(*req, nullptr) << what;
      }
    }
  }
  for (float x : b) EXPECT_EQ(x, 0.0f);
  strataResult_t async = strataInternalError;
  ASSERT_EQ(strataCommGetAsyncError(comm_, &async), strataSuccess);
  EXPECT_EQ(async, strataSuccess);
  EXPECT_EQ(strataAllGather(a, b, 8, strataFloat, comm_, nullptr), strataSuccess) << thread_error();
  EXPECT_EQ(b[7], 8.0f);
}

TEST_F(OneRank, ArgumentsTheLibraryChecksComeBackAsInvalidArgument) {
  std::int32_t ibuf[4] = {};
  float buf[4] = {};
  EXPECT_EQ(strataAllReduce(ibuf, ibuf, 4, strataInt32, strataAvg, comm_, nullptr),
            strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("strataAllReduce: "));
  EXPECT_EQ(strataBroadcast(buf, buf, 4, strataFloat, 1, comm_, nullptr), strataInvalidArgument);
  EXPECT_EQ(strataReduce(buf, buf, 4, strataFloat, strataSum, -1, comm_, nullptr),
            strataInvalidArgument);
  EXPECT_EQ(strataSend(buf, 4, strataFloat, 1, comm_, nullptr), strataInvalidArgument);
  EXPECT_EQ(strataRecv(buf, 4, strataFloat, -1, comm_, nullptr), strataInvalidArgument);
  strataResult_t async = strataInternalError;
  ASSERT_EQ(strataCommGetAsyncError(comm_, &async), strataSuccess);
  EXPECT_EQ(async, strataSuccess);
  // Still usable.
  EXPECT_EQ(strataAllReduce(buf, buf, 4, strataFloat, strataSum, comm_, nullptr), strataSuccess)
      << thread_error();
}

TEST_F(OneRank, BlockingCollectivesOnOneRankCopyThrough) {
  std::vector<double> in(37), out(37);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i) - 5.5;
  auto clear = [&] { std::fill(out.begin(), out.end(), -1.0); };
  const std::size_t n = in.size();

  clear();
  ASSERT_EQ(strataAllReduce(in.data(), out.data(), n, strataDouble, strataSum, comm_, nullptr),
            strataSuccess)
      << thread_error();
  EXPECT_EQ(out, in);
  clear();
  ASSERT_EQ(strataReduceScatter(in.data(), out.data(), n, strataDouble, strataMax, comm_, nullptr),
            strataSuccess)
      << thread_error();
  EXPECT_EQ(out, in);
  clear();
  ASSERT_EQ(strataAllGather(in.data(), out.data(), n, strataDouble, comm_, nullptr), strataSuccess)
      << thread_error();
  EXPECT_EQ(out, in);
  clear();
  ASSERT_EQ(strataBroadcast(in.data(), out.data(), n, strataDouble, 0, comm_, nullptr),
            strataSuccess)
      << thread_error();
  EXPECT_EQ(out, in);
  clear();
  ASSERT_EQ(strataReduce(in.data(), out.data(), n, strataDouble, strataAvg, 0, comm_, nullptr),
            strataSuccess)
      << thread_error();
  EXPECT_EQ(out, in);
  ASSERT_EQ(strataBarrier(comm_, nullptr), strataSuccess) << thread_error();

  std::vector<double> inplace = in;
  ASSERT_EQ(strataAllReduce(inplace.data(), inplace.data(), n, strataDouble, strataProd, comm_,
                            nullptr),
            strataSuccess)
      << thread_error();
  EXPECT_EQ(inplace, in);
}

TEST_F(OneRank, RequestLifecycle) {
  std::vector<std::int64_t> in(1000), out(1000, 0);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::int64_t>(i * i);
  strataRequest_t req = fake_handle<strataRequest_t>(0x10);
  ASSERT_EQ(strataAllReduce(in.data(), out.data(), in.size(), strataInt64, strataMin, comm_, &req),
            strataSuccess)
      << thread_error();
  ASSERT_NE(req, nullptr);
  int done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  strataResult_t r = strataInProgress;
  while ((r = strataTest(req, &done)) == strataInProgress) {
    EXPECT_EQ(done, 0);
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::yield();
  }
  ASSERT_EQ(r, strataSuccess) << thread_error();
  EXPECT_EQ(done, 1);
  EXPECT_EQ(out, in);
  // The outcome is cached: asking again gives the same answer.
  done = 0;
  EXPECT_EQ(strataTest(req, &done), strataSuccess);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(strataWait(req), strataSuccess);
  EXPECT_EQ(strataTest(req, nullptr), strataInvalidArgument);
  EXPECT_EQ(thread_error(), "strataTest: done is NULL");

  ASSERT_EQ(strataRequestFree(req), strataSuccess);
  EXPECT_EQ(strataRequestFree(req), strataInvalidArgument) << "double free is reported";
  EXPECT_EQ(strataWait(req), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("not a live request"));
  EXPECT_EQ(strataCommCount(fake_handle<strataComm_t>(reinterpret_cast<std::uintptr_t>(req)),
                            &done),
            strataInvalidArgument)
      << "a request handle is never mistaken for a communicator";
}

TEST_F(OneRank, RequestArgumentErrorsLeaveTheRequestOutputNull) {
  float buf[4] = {};
  strataRequest_t req = fake_handle<strataRequest_t>(0x10);
  EXPECT_EQ(strataAllGather(buf, buf, 4, from_int<strataDataType_t>(9), comm_, &req),
            strataInvalidArgument);
  EXPECT_EQ(req, nullptr);
}

TEST_F(OneRank, DestroyWaitsForFreedRequests) {
  constexpr int kOps = 16;
  std::vector<std::vector<float>> in(kOps), out(kOps);
  for (int k = 0; k < kOps; ++k) {
    in[k].assign(4096, static_cast<float>(k));
    out[k].assign(4096, -1.0f);
    strataRequest_t req = nullptr;
    ASSERT_EQ(strataAllReduce(in[k].data(), out[k].data(), in[k].size(), strataFloat, strataSum,
                              comm_, &req),
              strataSuccess)
        << thread_error();
    // Freed at once: the operation keeps running, as with MPI_Request_free.
    ASSERT_EQ(strataRequestFree(req), strataSuccess);
  }
  ASSERT_EQ(strataCommDestroy(comm_), strataSuccess) << thread_error();
  const auto destroyed = comm_;
  comm_ = nullptr;
  for (int k = 0; k < kOps; ++k) EXPECT_EQ(out[k], in[k]) << k;
  int n = 0;
  EXPECT_EQ(strataCommCount(destroyed, &n), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("not a live communicator"));
  EXPECT_EQ(strataCommDestroy(destroyed), strataInvalidArgument) << "double destroy is reported";
}

TEST_F(OneRank, AsyncErrorReportsOutstandingThenSuccess) {
  std::vector<float> a(1 << 16, 1.0f);
  std::vector<strataRequest_t> reqs;
  for (int k = 0; k < 8; ++k) {
    strataRequest_t req = nullptr;
    ASSERT_EQ(strataAllReduce(a.data(), a.data(), a.size(), strataFloat, strataMax, comm_, &req),
              strataSuccess);
    reqs.push_back(req);
  }
  strataResult_t async = strataInternalError;
  ASSERT_EQ(strataCommGetAsyncError(comm_, &async), strataSuccess);
  EXPECT_TRUE(async == strataInProgress || async == strataSuccess) << async;
  for (auto req : reqs) {
    EXPECT_EQ(strataWait(req), strataSuccess) << thread_error();
    EXPECT_EQ(strataRequestFree(req), strataSuccess);
  }
  ASSERT_EQ(strataCommGetAsyncError(comm_, &async), strataSuccess);
  EXPECT_EQ(async, strataSuccess);
}

TEST_F(OneRank, LastErrorIsPerThreadAndPerCommunicatorAndClearedBySuccess) {
  float buf[4] = {};
  ASSERT_EQ(strataAllReduce(buf, buf, 4, from_int<strataDataType_t>(42), strataSum, comm_, nullptr),
            strataInvalidArgument);
  const std::string mine = thread_error();
  EXPECT_THAT(mine, HasSubstr("datatype 42"));
  EXPECT_EQ(std::string(strataGetLastError(comm_)), mine);

  std::string theirs;
  std::thread other([&] {
    EXPECT_EQ(std::string(strataGetLastError(nullptr)), "") << "a new thread starts clean";
    EXPECT_EQ(strataCommUserRank(comm_, nullptr), strataInvalidArgument);
    theirs = strataGetLastError(nullptr);
  });
  other.join();
  EXPECT_EQ(theirs, "strataCommUserRank: rank is NULL");
  EXPECT_EQ(thread_error(), mine) << "another thread's failure does not overwrite ours";
  EXPECT_EQ(std::string(strataGetLastError(comm_)), theirs) << "the comm keeps its latest";

  // A query that succeeds clears the thread's message (it describes the latest call)
  // but not the communicator's: a watchdog polling strataCommGetAsyncError must not
  // wipe the message of the failure it is about to report.
  strataResult_t async = strataInternalError;
  ASSERT_EQ(strataCommGetAsyncError(comm_, &async), strataSuccess);
  EXPECT_EQ(thread_error(), "");
  EXPECT_EQ(std::string(strataGetLastError(comm_)), theirs);

  // An operation that succeeds afterwards leaves no stale message on either: the probe
  // found the old one kept after later calls had succeeded.
  ASSERT_EQ(strataAllReduce(buf, buf, 4, from_int<strataDataType_t>(42), strataSum, comm_, nullptr),
            strataInvalidArgument);
  ASSERT_EQ(strataBarrier(comm_, nullptr), strataSuccess);
  EXPECT_EQ(thread_error(), "");
  EXPECT_EQ(std::string(strataGetLastError(comm_)), "");
  strataRequest_t req = nullptr;
  ASSERT_EQ(strataAllReduce(buf, buf, 4, from_int<strataDataType_t>(42), strataSum, comm_, &req),
            strataInvalidArgument);
  ASSERT_EQ(strataAllReduce(buf, buf, 4, strataFloat, strataSum, comm_, &req), strataSuccess);
  EXPECT_EQ(std::string(strataGetLastError(comm_)), "") << "a successful non-blocking issue clears it too";
  ASSERT_EQ(strataWait(req), strataSuccess);
  ASSERT_EQ(strataRequestFree(req), strataSuccess);
}

TEST_F(OneRank, RequestsMayBeObservedFromSeveralThreadsAtOnce) {
  constexpr int kOps = 64;
  std::vector<std::vector<float>> bufs(kOps, std::vector<float>(8192, 2.0f));
  std::vector<strataRequest_t> reqs(kOps, nullptr);
  for (int k = 0; k < kOps; ++k)
    ASSERT_EQ(strataAllReduce(bufs[k].data(), bufs[k].data(), bufs[k].size(), strataFloat,
                              strataSum, comm_, &reqs[k]),
              strataSuccess);
  // One thread blocks in strataWait while others poll the same requests and the
  // communicator; each must see the same outcome and none may block the others.
  std::atomic<bool> stop{false};
  std::vector<std::thread> pollers;
  for (int p = 0; p < 2; ++p)
    pollers.emplace_back([&] {
      while (!stop.load()) {
        for (auto req : reqs) {
          int done = 0;
          const strataResult_t r = strataTest(req, &done);
          EXPECT_TRUE(r == strataSuccess || r == strataInProgress) << r;
          EXPECT_EQ(done, r == strataSuccess ? 1 : 0);
        }
        strataResult_t async = strataInternalError;
        EXPECT_EQ(strataCommGetAsyncError(comm_, &async), strataSuccess);
        EXPECT_TRUE(async == strataSuccess || async == strataInProgress) << async;
      }
    });
  for (auto req : reqs) EXPECT_EQ(strataWait(req), strataSuccess) << thread_error();
  stop = true;
  for (auto& t : pollers) t.join();
  for (int k = 0; k < kOps; ++k) {
    EXPECT_EQ(bufs[k][0], 2.0f);
    EXPECT_EQ(strataRequestFree(reqs[k]), strataSuccess);
  }
}

TEST_F(OneRank, AbortReleasesTheCommunicator) {
  float buf[256] = {};
  strataRequest_t req = nullptr;
  ASSERT_EQ(strataAllReduce(buf, buf, 256, strataFloat, strataSum, comm_, &req), strataSuccess);
  ASSERT_EQ(strataCommAbort(comm_), strataSuccess) << thread_error();
  const auto aborted = comm_;
  comm_ = nullptr;
  // The request outlives its communicator: it either finished first or was aborted.
  const strataResult_t r = strataWait(req);
  EXPECT_TRUE(r == strataSuccess || r == strataAborted) << strataGetErrorString(r);
  EXPECT_EQ(strataRequestFree(req), strataSuccess);
  EXPECT_EQ(strataBarrier(aborted, nullptr), strataInvalidArgument);
  EXPECT_THAT(thread_error(), HasSubstr("not a live communicator"));
}

TEST(CApiInit, EachTransportWorksOnOneRank) {
  for (int transport : {strataTransportAuto, strataTransportTcp, strataTransportUcx}) {
    strataUniqueId id;
    ASSERT_EQ(strataGetUniqueId(&id), strataSuccess) << thread_error();
    strataConfig_t config = STRATA_CONFIG_INITIALIZER;
    config.transport = transport;
    config.timeout_ms = 20000;
    strataComm_t comm = nullptr;
    ASSERT_EQ(strataCommInitRankConfig(&comm, 1, id, 0, &config), strataSuccess)
        << "transport " << transport << ": " << thread_error();
    double x = 3.0, y = 0.0;
    EXPECT_EQ(strataAllReduce(&x, &y, 1, strataFloat64, strataSum, comm, nullptr), strataSuccess)
        << thread_error();
    EXPECT_EQ(y, 3.0);
    EXPECT_EQ(strataCommDestroy(comm), strataSuccess);
  }
}

TEST(CApiInit, NullConfigMeansDefaults) {
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess) << thread_error();
  strataComm_t comm = nullptr;
  ASSERT_EQ(strataCommInitRankConfig(&comm, 1, id, 0, nullptr), strataSuccess) << thread_error();
  int n = 0;
  EXPECT_EQ(strataCommCount(comm, &n), strataSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(strataCommDestroy(comm), strataSuccess);
}

}  // namespace
