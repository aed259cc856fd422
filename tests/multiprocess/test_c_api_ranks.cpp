// Real ranks driven only through the C ABI. The unique id is created in the parent before
// fork (the parent serves the rendezvous store), as a launcher would with ncclUniqueId.
// Every rank regenerates every rank's input from a shared seed, so each one checks its
// own output against a locally computed reference.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <ostream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "fork_ranks.hpp"
#include "store_process.hpp"
#include "strata/strata.h"

namespace {

using strata::test::fork_ranks;
using strata::test::require;
using namespace std::chrono_literals;

// Whole test, all ranks: generous on two loaded cores, but bounded.
constexpr auto kTestLimit = 150s;
// Each operation: a hang shows up as strataTimeout well before kTestLimit.
constexpr int kOpTimeoutMs = 30000;

void check(strataResult_t r, const std::string& what) {
  if (r != strataSuccess)
    throw std::runtime_error(what + ": " + strataGetErrorString(r) + ": " +
                             strataGetLastError(nullptr));
}

// ---- element encoding, independent of the library's own conversions ----

std::size_t size_of(strataDataType_t t) {
  switch (t) {
    case strataFloat32: return 4;
    case strataFloat64: return 8;
    case strataFloat16: return 2;
    case strataBfloat16: return 2;
    case strataInt8: return 1;
    case strataUint8: return 1;
    case strataInt32: return 4;
    case strataInt64: return 8;
    default: break;
  }
  throw std::logic_error("bad type");
}

bool is_floating(strataDataType_t t) {
  return t == strataFloat32 || t == strataFloat64 || t == strataFloat16 || t == strataBfloat16;
}

const char* name_of(strataDataType_t t) {
  static const char* names[] = {"f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64"};
  return names[t];
}
const char* name_of(strataRedOp_t op) {
  static const char* names[] = {"sum", "prod", "min", "max", "avg"};
  return names[op];
}

double half_to_double(std::uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}

// Only for the exactly representable values the tests feed in.
std::uint16_t double_to_half(double v) {
  if (v == 0) return 0;
  const std::uint16_t sign = v < 0 ? 0x8000 : 0;
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
  double f = std::nearbyint((2 * m - 1) * 1024);
  if (f == 1024) {
    f = 0;
    ++e;
  }
  return static_cast<std::uint16_t>(sign | ((e + 14) << 10) | static_cast<int>(f));
}

double bf16_to_double(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t double_to_bf16(double v) {
  const float f = static_cast<float>(v);
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

void put(strataDataType_t t, void* base, std::size_t i, double v) {
  auto* p = static_cast<unsigned char*>(base) + i * size_of(t);
  auto store = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (t) {
    case strataFloat32: return store(static_cast<float>(v));
    case strataFloat64: return store(v);
    case strataFloat16: return store(double_to_half(v));
    case strataBfloat16: return store(double_to_bf16(v));
    case strataInt8: return store(static_cast<std::int8_t>(v));
    case strataUint8: return store(static_cast<std::uint8_t>(v));
    case strataInt32: return store(static_cast<std::int32_t>(v));
    case strataInt64: return store(static_cast<std::int64_t>(v));
    default: throw std::logic_error("bad type");
  }
}

double get(strataDataType_t t, const void* base, std::size_t i) {
  const auto* p = static_cast<const unsigned char*>(base) + i * size_of(t);
  auto load = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (t) {
    case strataFloat32: return load(float{});
    case strataFloat64: return load(double{});
    case strataFloat16: return half_to_double(load(std::uint16_t{}));
    case strataBfloat16: return bf16_to_double(load(std::uint16_t{}));
    case strataInt8: return load(std::int8_t{});
    case strataUint8: return load(std::uint8_t{});
    case strataInt32: return load(std::int32_t{});
    case strataInt64: return static_cast<double>(load(std::int64_t{}));
    default: throw std::logic_error("bad type");
  }
}

struct Buffer {
  strataDataType_t type;
  std::vector<unsigned char> bytes;
  Buffer(strataDataType_t t, std::size_t n, unsigned char fill = 0xA5)
      : type(t), bytes(n * size_of(t), fill) {}
  std::size_t count() const { return bytes.size() / size_of(type); }
  void* data() { return bytes.data(); }
  double operator[](std::size_t i) const { return get(type, bytes.data(), i); }
};

// Small integers: every sum, product and extreme of up to 3 of them is exact in every
// type (int8 included), so only avg needs a tolerance.
Buffer input_of(int rank, std::uint64_t seed, strataDataType_t t, strataRedOp_t op,
                std::size_t n) {
  std::mt19937_64 gen(seed * 7919 + static_cast<std::uint64_t>(rank));
  const bool unsigned_type = t == strataUint8;
  int lo = unsigned_type ? 0 : -8, hi = unsigned_type ? 16 : 8;
  if (op == strataProd) {
    lo = unsigned_type ? 0 : -3;
    hi = 3;
  }
  std::uniform_int_distribution<int> dist(lo, hi);
  Buffer b(t, n);
  for (std::size_t i = 0; i < n; ++i) put(t, b.data(), i, dist(gen));
  return b;
}

double combine(strataRedOp_t op, double a, double b) {
  switch (op) {
    case strataSum:
    case strataAvg: return a + b;
    case strataProd: return a * b;
    case strataMin: return std::min(a, b);
    case strataMax: return std::max(a, b);
    default: throw std::logic_error("bad op");
  }
}

std::vector<double> reference(const std::vector<Buffer>& inputs, strataRedOp_t op) {
  std::vector<double> out(inputs[0].count());
  for (std::size_t i = 0; i < out.size(); ++i) {
    double acc = inputs[0][i];
    for (std::size_t r = 1; r < inputs.size(); ++r) acc = combine(op, acc, inputs[r][i]);
    out[i] = op == strataAvg ? acc / static_cast<double>(inputs.size()) : acc;
  }
  return out;
}

double tolerance(strataDataType_t t, strataRedOp_t op, double expected) {
  if (op != strataAvg) return 0;
  const double rel = t == strataBfloat16 ? 1.0 / 128 : t == strataFloat16 ? 1.0 / 1024
                     : t == strataFloat32 ? 1e-6 : 1e-12;
  return rel * std::max(1.0, std::fabs(expected));
}

void expect_equal(const Buffer& got, std::size_t offset, const std::vector<double>& want,
                  std::size_t want_offset, std::size_t n, strataRedOp_t op,
                  const std::string& what) {
  for (std::size_t i = 0; i < n; ++i) {
    const double g = got[offset + i], w = want[want_offset + i];
    if (std::fabs(g - w) > tolerance(got.type, op, w))
      throw std::runtime_error(what + ": element " + std::to_string(i) + " is " +
                               std::to_string(g) + ", expected " + std::to_string(w));
  }
}

const std::vector<strataDataType_t> kTypes = {strataFloat32, strataFloat64, strataFloat16,
                                              strataBfloat16, strataInt8, strataUint8,
                                              strataInt32, strataInt64};
const std::vector<strataRedOp_t> kOps = {strataSum, strataProd, strataMin, strataMax, strataAvg};
// Odd sizes and one large enough to be split into pieces by any pipelining.
const std::vector<std::size_t> kCounts = {1, 7, 1000, 70001};

std::vector<Buffer> all_inputs(int nranks, std::uint64_t seed, strataDataType_t t,
                               strataRedOp_t op, std::size_t n) {
  std::vector<Buffer> v;
  for (int r = 0; r < nranks; ++r) v.push_back(input_of(r, seed, t, op, n));
  return v;
}

// ---- per-test setup ----

struct Setup {
  int nranks;
  int transport;
  const char* name;
};

std::string setup_name(const ::testing::TestParamInfo<Setup>& info) { return info.param.name; }
void PrintTo(const Setup& s, std::ostream* os) { *os << s.name; }

class CApiRanks : public ::testing::TestWithParam<Setup> {
 protected:
  void SetUp() override {
    store_.emplace();
    id_ = store_->c_id();
  }

  strataComm_t init(int rank) const {
    strataConfig_t config = STRATA_CONFIG_INITIALIZER;
    config.transport = GetParam().transport;
    config.timeout_ms = kOpTimeoutMs;
    strataComm_t comm = nullptr;
    check(strataCommInitRankConfig(&comm, GetParam().nranks, id_, rank, &config),
          "strataCommInitRankConfig");
    int n = 0, r = -1;
    check(strataCommCount(comm, &n), "strataCommCount");
    check(strataCommUserRank(comm, &r), "strataCommUserRank");
    require(n == GetParam().nranks && r == rank, "count/rank do not match what was asked");
    return comm;
  }

  // Runs body on every rank with its own communicator, then destroys it.
  void run(const std::function<void(strataComm_t, int rank, int nranks)>& body) {
    const int n = GetParam().nranks;
    auto results = fork_ranks(n, kTestLimit, [&](int rank) {
      strataComm_t comm = init(rank);
      body(comm, rank, n);
      check(strataCommDestroy(comm), "strataCommDestroy");
    });
    EXPECT_EQ(strata::test::failures(results), "");
  }

  std::optional<strata::test::StoreProcess> store_;
  strataUniqueId id_{};
};

TEST_P(CApiRanks, AllReduceMatchesReference) {
  run([](strataComm_t comm, int rank, int nranks) {
    std::uint64_t seed = 1;
    for (auto t : kTypes)
      for (auto op : kOps) {
        if (op == strataAvg && !is_floating(t)) continue;
        for (auto n : kCounts) {
          const auto inputs = all_inputs(nranks, ++seed, t, op, n);
          const auto want = reference(inputs, op);
          const std::string what = std::string("allreduce ") + name_of(t) + " " + name_of(op) +
                                   " n=" + std::to_string(n);
          Buffer out(t, n);
          check(strataAllReduce(inputs[rank].bytes.data(), out.data(), n, t, op, comm, nullptr),
                what);
          expect_equal(out, 0, want, 0, n, op, what);
          // In place.
          Buffer inplace = inputs[rank];
          check(strataAllReduce(inplace.data(), inplace.data(), n, t, op, comm, nullptr),
                what + " in place");
          expect_equal(inplace, 0, want, 0, n, op, what + " in place");
        }
      }
  });
}

TEST_P(CApiRanks, ReduceScatterMatchesReference) {
  run([](strataComm_t comm, int rank, int nranks) {
    std::uint64_t seed = 100;
    for (auto t : kTypes)
      for (auto op : {strataSum, strataMax, strataAvg}) {
        if (op == strataAvg && !is_floating(t)) continue;
        for (auto recvcount : {std::size_t{1}, std::size_t{333}, std::size_t{20000}}) {
          const std::size_t n = recvcount * static_cast<std::size_t>(nranks);
          const auto inputs = all_inputs(nranks, ++seed, t, op, n);
          const auto want = reference(inputs, op);
          const std::string what = std::string("reduce_scatter ") + name_of(t) + " " +
                                   name_of(op) + " recvcount=" + std::to_string(recvcount);
          Buffer out(t, recvcount);
          check(strataReduceScatter(inputs[rank].bytes.data(), out.data(), recvcount, t, op, comm,
                                    nullptr),
                what);
          expect_equal(out, 0, want, recvcount * static_cast<std::size_t>(rank), recvcount, op,
                       what);
        }
      }
  });
}

TEST_P(CApiRanks, AllGatherMatchesReference) {
  run([](strataComm_t comm, int rank, int nranks) {
    std::uint64_t seed = 200;
    for (auto t : kTypes)
      for (auto n : kCounts) {
        const auto inputs = all_inputs(nranks, ++seed, t, strataSum, n);
        const std::string what = std::string("allgather ") + name_of(t) + " n=" + std::to_string(n);
        Buffer out(t, n * static_cast<std::size_t>(nranks));
        check(strataAllGather(inputs[rank].bytes.data(), out.data(), n, t, comm, nullptr), what);
        for (int r = 0; r < nranks; ++r) {
          const auto want = reference({inputs[r]}, strataSum);
          expect_equal(out, n * static_cast<std::size_t>(r), want, 0, n, strataSum,
                       what + " block " + std::to_string(r));
        }
      }
  });
}

TEST_P(CApiRanks, BroadcastFromEveryRoot) {
  run([](strataComm_t comm, int rank, int nranks) {
    std::uint64_t seed = 300;
    for (int root = 0; root < nranks; ++root)
      for (auto t : {strataFloat32, strataFloat16, strataInt8, strataInt64})
        for (auto n : kCounts) {
          const auto inputs = all_inputs(nranks, ++seed, t, strataSum, n);
          const std::string what = std::string("broadcast ") + name_of(t) + " root=" +
                                   std::to_string(root) + " n=" + std::to_string(n);
          Buffer out(t, n);
          // Only the root's sendbuff is read; the others pass NULL.
          const void* send = rank == root ? inputs[rank].bytes.data() : nullptr;
          check(strataBroadcast(send, out.data(), n, t, root, comm, nullptr), what);
          expect_equal(out, 0, reference({inputs[root]}, strataSum), 0, n, strataSum, what);
        }
  });
}

TEST_P(CApiRanks, ReduceToEveryRoot) {
  run([](strataComm_t comm, int rank, int nranks) {
    std::uint64_t seed = 400;
    for (int root = 0; root < nranks; ++root)
      for (auto t : {strataFloat64, strataBfloat16, strataUint8, strataInt32})
        for (auto op : kOps) {
          if (op == strataAvg && !is_floating(t)) continue;
          const std::size_t n = 4099;
          const auto inputs = all_inputs(nranks, ++seed, t, op, n);
          const std::string what = std::string("reduce ") + name_of(t) + " " + name_of(op) +
                                   " root=" + std::to_string(root);
          // recvbuff may be NULL off the root.
          Buffer out(t, n);
          void* recv = rank == root ? out.data() : nullptr;
          check(strataReduce(inputs[rank].bytes.data(), recv, n, t, op, root, comm, nullptr),
                what);
          if (rank == root) expect_equal(out, 0, reference(inputs, op), 0, n, op, what);
        }
  });
}

TEST_P(CApiRanks, SendRecvAroundARingKeepsOrder) {
  run([](strataComm_t comm, int rank, int nranks) {
    const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    constexpr int kMessages = 4;
    const std::size_t n = 12345;
    std::vector<Buffer> sent, received;
    std::vector<strataRequest_t> reqs;
    for (int m = 0; m < kMessages; ++m) {
      sent.push_back(input_of(rank, 500 + static_cast<std::uint64_t>(m), strataInt32, strataSum, n));
      received.emplace_back(strataInt32, n);
    }
    // Receives first and everything non-blocking, so no rank waits on a send that its
    // neighbour has not yet matched.
    for (int m = 0; m < kMessages; ++m) {
      strataRequest_t r = nullptr;
      check(strataRecv(received[m].data(), n, strataInt32, prev, comm, &r), "recv");
      reqs.push_back(r);
    }
    for (int m = 0; m < kMessages; ++m) {
      strataRequest_t r = nullptr;
      check(strataSend(sent[m].bytes.data(), n, strataInt32, next, comm, &r), "send");
      reqs.push_back(r);
    }
    for (auto r : reqs) {
      check(strataWait(r), "wait");
      check(strataRequestFree(r), "free");
    }
    for (int m = 0; m < kMessages; ++m) {
      const auto want =
          reference({input_of(prev, 500 + static_cast<std::uint64_t>(m), strataInt32, strataSum, n)},
                    strataSum);
      expect_equal(received[m], 0, want, 0, n, strataSum, "message " + std::to_string(m));
    }
    check(strataBarrier(comm, nullptr), "barrier");
  });
}

TEST_P(CApiRanks, ReceivesFromAnySourceNameTheSender) {
  run([](strataComm_t comm, int rank, int nranks) {
    const std::size_t n = 777;
    if (rank != 0) {
      const auto mine = input_of(rank, 600, strataInt32, strataSum, n);
      check(strataSend(mine.bytes.data(), n, strataInt32, 0, comm, nullptr), "send");
    } else {
      std::vector<int> seen(static_cast<std::size_t>(nranks), 0);
      for (int m = 1; m < nranks; ++m) {
        Buffer got(strataInt32, n);
        int source = -1;
        strataRequest_t r = nullptr;
        check(strataRecvAny(got.data(), n, strataInt32, &source, comm, &r), "recv any");
        check(strataWait(r), "wait");
        check(strataRequestFree(r), "free");
        ASSERT_TRUE(source > 0 && source < nranks) << source;
        ++seen[static_cast<std::size_t>(source)];
        const auto want = reference({input_of(source, 600, strataInt32, strataSum, n)}, strataSum);
        expect_equal(got, 0, want, 0, n, strataSum, "message from rank " + std::to_string(source));
      }
      for (int s = 1; s < nranks; ++s) EXPECT_EQ(seen[static_cast<std::size_t>(s)], 1) << "rank " << s;
    }
    check(strataBarrier(comm, nullptr), "barrier");
  });
}

TEST_P(CApiRanks, OutstandingRequestsCompleteInAnyWaitOrder) {
  run([](strataComm_t comm, int rank, int nranks) {
    constexpr int kOps = 12;
    const std::size_t n = 30000;
    std::vector<std::vector<Buffer>> inputs;
    std::vector<Buffer> outs;
    std::vector<strataRequest_t> reqs(kOps, nullptr);
    for (int k = 0; k < kOps; ++k) {
      inputs.push_back(all_inputs(nranks, 600 + static_cast<std::uint64_t>(k), strataFloat32,
                                  strataSum, n));
      outs.emplace_back(strataFloat32, n);
    }
    for (int k = 0; k < kOps; ++k)
      check(strataAllReduce(inputs[k][rank].bytes.data(), outs[k].data(), n, strataFloat32,
                            strataSum, comm, &reqs[k]),
            "allreduce " + std::to_string(k));
    // Poll the odd ones with strataTest, wait for the even ones last to first.
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (int k = 1; k < kOps; k += 2) {
      int done = 0;
      strataResult_t r;
      while ((r = strataTest(reqs[k], &done)) == strataInProgress) {
        require(done == 0, "strataInProgress with done set");
        require(std::chrono::steady_clock::now() < deadline, "strataTest never finished");
        std::this_thread::sleep_for(100us);
      }
      check(r, "test " + std::to_string(k));
      require(done == 1, "finished request without done set");
    }
    for (int k = kOps - 2; k >= 0; k -= 2) check(strataWait(reqs[k]), "wait " + std::to_string(k));
    for (int k = 0; k < kOps; ++k) {
      expect_equal(outs[k], 0, reference(inputs[k], strataSum), 0, n, strataSum,
                   "allreduce " + std::to_string(k));
      check(strataRequestFree(reqs[k]), "free");
    }
    strataResult_t async = strataInternalError;
    check(strataCommGetAsyncError(comm, &async), "strataCommGetAsyncError");
    require(async == strataSuccess, std::string("async error: ") + strataGetErrorString(async));
  });
}

const Setup kSetups[] = {
    {2, strataTransportTcp, "TwoRanksTcp"},
    {3, strataTransportTcp, "ThreeRanksTcp"},
    {3, strataTransportUcx, "ThreeRanksUcx"},
};
INSTANTIATE_TEST_SUITE_P(Ranks, CApiRanks, ::testing::ValuesIn(kSetups), setup_name);

// ---- failures, each on two ranks over TCP ----

strataComm_t init_tcp(const strataUniqueId& id, int rank, int nranks, int timeout_ms) {
  strataConfig_t config = STRATA_CONFIG_INITIALIZER;
  config.transport = strataTransportTcp;
  config.timeout_ms = timeout_ms;
  strataComm_t comm = nullptr;
  check(strataCommInitRankConfig(&comm, nranks, id, rank, &config), "init");
  return comm;
}

// The "RESULT=<code>" line a rank printed, or -1.
int printed_result(const strata::test::RankResult& r) {
  std::smatch m;
  static const std::regex re("RESULT=(-?[0-9]+)");
  return std::regex_search(r.output, m, re) ? std::stoi(m[1]) : -1;
}

TEST(CApiRankFailures, InitFromEnvironment) {
  const std::string root = strata::test::free_root_address();
  auto results = fork_ranks(2, kTestLimit, [&](int rank) {
    ::setenv("STRATA_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("STRATA_WORLD_SIZE", "2", 1);
    ::setenv("STRATA_ROOT", root.c_str(), 1);
    ::setenv("STRATA_TRANSPORT", "tcp", 1);
    strataComm_t comm = nullptr;
    check(strataCommInitFromEnv(&comm), "strataCommInitFromEnv");
    int n = 0, r = -1;
    check(strataCommCount(comm, &n), "count");
    check(strataCommUserRank(comm, &r), "rank");
    require(n == 2 && r == rank, "environment rank/size not honoured");
    std::int64_t v = rank + 1, sum = 0;
    check(strataAllReduce(&v, &sum, 1, strataInt64, strataSum, comm, nullptr), "allreduce");
    require(sum == 3, "allreduce over the environment's communicator is wrong");
    check(strataCommDestroy(comm), "destroy");
  });
  EXPECT_EQ(strata::test::failures(results), "");
}

TEST(CApiRankFailures, PeerThatNeverJoinsTheCollectiveTimesOut) {
  const strata::test::StoreProcess store;
  const strataUniqueId id = store.c_id();
  auto results = fork_ranks(2, kTestLimit, [&](int rank) {
    strataComm_t comm = init_tcp(id, rank, 2, 1500);
    if (rank == 1) {
      // Present but silent until rank 0 has certainly given up.
      std::this_thread::sleep_for(4s);
      check(strataCommAbort(comm), "abort");
      return;
    }
    float x = 1.0f;
    const auto start = std::chrono::steady_clock::now();
    const strataResult_t r = strataAllReduce(&x, &x, 1, strataFloat, strataSum, comm, nullptr);
    const auto took = std::chrono::steady_clock::now() - start;
    require(r == strataTimeout, std::string("expected strataTimeout, got ") +
                                    strataGetErrorString(r) + ": " + strataGetLastError(nullptr));
    require(took < 3500ms, "the timeout took far longer than configured");
    require(std::string(strataGetLastError(comm)).find("strataAllReduce") != std::string::npos,
            std::string("comm's last error does not name the call: ") + strataGetLastError(comm));
    strataResult_t async = strataSuccess;
    check(strataCommGetAsyncError(comm, &async), "async");
    require(async == strataTimeout,
            std::string("async error is ") + strataGetErrorString(async));
    check(strataCommAbort(comm), "abort");
  });
  EXPECT_EQ(strata::test::failures(results), "");
}

TEST(CApiRankFailures, AbortFromAnotherThreadUnblocksABlockingCall) {
  const strata::test::StoreProcess store;
  const strataUniqueId id = store.c_id();
  auto results = fork_ranks(2, kTestLimit, [&](int rank) {
    strataComm_t comm = init_tcp(id, rank, 2, kOpTimeoutMs);
    if (rank == 1) {
      std::this_thread::sleep_for(2s);
      check(strataCommAbort(comm), "abort");
      return;
    }
    std::thread watchdog([comm] {
      std::this_thread::sleep_for(300ms);
      check(strataCommAbort(comm), "abort from the watchdog");
    });
    std::int32_t buf[16];
    const auto start = std::chrono::steady_clock::now();
    // Rank 1 never sends: only the abort can end this before the 30 s timeout.
    const strataResult_t r = strataRecv(buf, 16, strataInt32, 1, comm, nullptr);
    const auto took = std::chrono::steady_clock::now() - start;
    watchdog.join();
    require(r == strataAborted, std::string("expected strataAborted, got ") +
                                    strataGetErrorString(r) + ": " + strataGetLastError(nullptr));
    require(took < 10s, "abort did not unblock the receive promptly");
    int n = 0;
    require(strataCommCount(comm, &n) == strataInvalidArgument,
            "an aborted communicator's handle must be dead");
  });
  EXPECT_EQ(strata::test::failures(results), "");
}

TEST(CApiRankFailures, DifferentCollectivesAreReportedAsMismatch) {
  const strata::test::StoreProcess store;
  const strataUniqueId id = store.c_id();
  auto results = fork_ranks(2, kTestLimit, [&](int rank) {
    strataComm_t comm = init_tcp(id, rank, 2, 10000);
    std::vector<float> buf(64, 1.0f);
    const strataResult_t r =
        rank == 0 ? strataAllReduce(buf.data(), buf.data(), buf.size(), strataFloat, strataSum,
                                    comm, nullptr)
                  : strataBroadcast(buf.data(), buf.data(), buf.size(), strataFloat, 0, comm,
                                    nullptr);
    std::printf("RESULT=%d\n%s\n", static_cast<int>(r), strataGetLastError(nullptr));
    std::fflush(stdout);
    check(strataCommAbort(comm), "abort");
  });
  ASSERT_EQ(strata::test::failures(results), "");
  // Both ranks learn of it, each with a message naming its own call.
  const char* calls[] = {"strataAllReduce: ", "strataBroadcast: "};
  for (const auto& r : results) {
    EXPECT_EQ(printed_result(r), strataMismatch) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find(calls[r.rank]), std::string::npos) << r.output;
  }
}

TEST(CApiRankFailures, LostRankIsNamedAndSurvivorsShrink) {
  const strata::test::StoreProcess store;
  const strataUniqueId id = store.c_id();
  auto results = fork_ranks(3, kTestLimit, [&](int rank) {
    strataComm_t comm = init_tcp(id, rank, 3, kOpTimeoutMs);
    std::vector<std::int64_t> buf(4099, rank + 1);
    if (rank == 2) {
      check(strataAllReduce(buf.data(), buf.data(), buf.size(), strataInt64, strataSum, comm, nullptr), "allreduce");
      ::_exit(0);  // dies without a word, maybe before the others have finished that allreduce
    }
    strataResult_t r = strataSuccess;
    for (int i = 0; i < 1000 && r == strataSuccess; ++i)
      r = strataAllReduce(buf.data(), buf.data(), buf.size(), strataInt64, strataSum, comm, nullptr);
    require(r == strataPeerLost, std::string("expected strataPeerLost, got ") + strataGetErrorString(r) + ": " +
                                     strataGetLastError(nullptr));
    int lost[4] = {-1, -1, -1, -1}, n = 0;
    check(strataCommGetLostRanks(comm, lost, 4, &n), "lost ranks");
    require(n == 1 && lost[0] == 2, "lost ranks: " + std::to_string(n) + " first " + std::to_string(lost[0]));
    require(strataCommShrink(comm, lost, -1, nullptr) == strataInvalidArgument, "a NULL newcomm was accepted");
    strataComm_t two = nullptr;
    check(strataCommShrink(comm, lost, n, &two), "shrink");
    int size = 0, me = -1;
    check(strataCommCount(two, &size), "count");
    check(strataCommUserRank(two, &me), "rank");
    require(size == 2 && me == rank, "the shrunk communicator is " + std::to_string(me) + " of " + std::to_string(size));
    std::vector<std::int64_t> v(4099, rank + 1);
    check(strataAllReduce(v.data(), v.data(), v.size(), strataInt64, strataSum, two, nullptr), "shrunk allreduce");
    require(v[0] == 3 && v[4098] == 3, "the shrunk allreduce gave " + std::to_string(v[0]));
    check(strataCommDestroy(two), "destroy the shrunk communicator");
    check(strataCommDestroy(comm), "destroy the failed communicator");
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(results[static_cast<std::size_t>(r)].exit_code, 0) << results[static_cast<std::size_t>(r)].output;
}

}  // namespace
