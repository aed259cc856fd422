// alltoall and alltoallv on forked ranks over each transport and across two emulated
// regions, against a reference: every rank regenerates every other rank's input from a
// shared seed. Uneven splits come from a random matrix every rank draws alike, with gaps
// between the blocks of recv that must stay untouched. Also the C ABI, bad arguments
// (refused, communicator still usable) and ranks disagreeing about splits (named).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fork_ranks.hpp"
#include "store_process.hpp"
#include "strata/strata.h"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;

constexpr std::uint8_t kUntouched = 0xA5;

// The element rank `from` sends to rank `to` at index i of that block, as bytes.
std::vector<std::uint8_t> block_bytes(std::uint64_t seed, int from, int to, std::size_t bytes) {
  std::mt19937_64 g(seed * 1000003u + static_cast<std::uint64_t>(from) * 7919u + static_cast<std::uint64_t>(to));
  std::vector<std::uint8_t> b(bytes);
  for (auto& x : b) x = static_cast<std::uint8_t>(g());
  return b;
}

// counts[i][j]: elements rank i sends rank j; every rank draws the same matrix.
std::vector<std::vector<std::size_t>> split_matrix(std::uint64_t seed, int p, std::size_t max) {
  std::mt19937_64 g(seed);
  std::vector<std::vector<std::size_t>> m(static_cast<std::size_t>(p), std::vector<std::size_t>(static_cast<std::size_t>(p)));
  for (auto& row : m)
    for (auto& c : row) c = (g() % 4 == 0) ? 0 : g() % (max + 1);  // zeros are common
  return m;
}

struct Layout {
  std::vector<std::size_t> counts, displs;
  std::size_t total = 0;  // elements the buffer holds, gaps included
};

// Blocks in reverse rank order with a gap of `gap` elements before each, so a wrong
// displacement or a write past a block shows.
Layout layout(const std::vector<std::size_t>& counts, std::size_t gap) {
  Layout l{counts, std::vector<std::size_t>(counts.size()), 0};
  for (std::size_t k = counts.size(); k-- > 0;) {
    l.total += gap;
    l.displs[k] = l.total;
    l.total += counts[k];
  }
  l.total += gap;
  return l;
}

// One alltoallv (or alltoall when `even`) of dtype dt; throws on any wrong byte.
void check_alltoall(Communicator& comm, DataType dt, std::uint64_t seed, std::size_t max, bool even, bool in_place) {
  const int p = comm.size(), me = comm.rank();
  const std::size_t esz = dtype_size(dt);
  auto m = split_matrix(seed, p, max);
  if (even)
    for (auto& row : m) std::fill(row.begin(), row.end(), max);
  std::vector<std::size_t> rc(static_cast<std::size_t>(p));
  for (int j = 0; j < p; ++j) rc[static_cast<std::size_t>(j)] = m[static_cast<std::size_t>(j)][static_cast<std::size_t>(me)];
  const auto& sc = m[static_cast<std::size_t>(me)];
  const std::size_t gap = even ? 0 : 3;
  const Layout sl = layout(sc, gap), rl = layout(rc, gap);
  std::vector<std::uint8_t> send(sl.total * esz, kUntouched), recv(rl.total * esz, kUntouched);
  if (even) {  // the contiguous layout alltoall assumes: block j at j*count
    for (int j = 0; j < p; ++j) {
      const auto b = block_bytes(seed, me, j, max * esz);
      std::copy(b.begin(), b.end(), send.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(j) * max * esz));
    }
  } else {
    for (int j = 0; j < p; ++j) {
      const auto u = static_cast<std::size_t>(j);
      const auto b = block_bytes(seed, me, j, sc[u] * esz);
      std::copy(b.begin(), b.end(), send.begin() + static_cast<std::ptrdiff_t>(sl.displs[u] * esz));
    }
  }
  if (even) {
    if (in_place) {
      recv = send;
      comm.alltoall(recv.data(), recv.data(), max, dt).wait();
    } else {
      comm.alltoall(send.data(), recv.data(), max, dt).wait();
    }
    for (int j = 0; j < p; ++j) {
      const auto want = block_bytes(seed, j, me, max * esz);
      require(std::equal(want.begin(), want.end(), recv.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(j) * max * esz)),
              "alltoall of " + std::to_string(max) + " " + to_string(dt) + ": block from rank " + std::to_string(j) + " differs");
    }
    return;
  }
  // In place for alltoallv: one buffer large enough for both layouts.
  std::vector<std::uint8_t> shared;
  void* rbuf = recv.data();
  const void* sbuf = send.data();
  if (in_place) {
    shared.assign(std::max(send.size(), recv.size()), kUntouched);
    std::copy(send.begin(), send.end(), shared.begin());
    sbuf = rbuf = shared.data();
  }
  comm.alltoallv(sbuf, sc, sl.displs, rbuf, rc, rl.displs, dt).wait();
  if (in_place) recv.assign(shared.begin(), shared.begin() + static_cast<std::ptrdiff_t>(recv.size()));
  std::vector<bool> covered(recv.size(), false);
  for (int j = 0; j < p; ++j) {
    const auto u = static_cast<std::size_t>(j);
    const auto want = block_bytes(seed, j, me, rc[u] * esz);
    const auto at = static_cast<std::ptrdiff_t>(rl.displs[u] * esz);
    require(std::equal(want.begin(), want.end(), recv.begin() + at),
            std::string("alltoallv ") + to_string(dt) + " seed " + std::to_string(seed) + ": block of " + std::to_string(rc[u]) +
                " from rank " + std::to_string(j) + " differs");
    std::fill(covered.begin() + at, covered.begin() + at + static_cast<std::ptrdiff_t>(want.size()), true);
  }
  if (!in_place)
    for (std::size_t i = 0; i < recv.size(); ++i)
      require(covered[i] || recv[i] == kUntouched, "alltoallv wrote byte " + std::to_string(i) + " between blocks");
}

void all_cases(Communicator& comm) {
  std::uint64_t seed = 1;
  for (auto dt : {DataType::f32, DataType::i64, DataType::u8, DataType::bf16})
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000} + static_cast<std::size_t>(comm.size())})
      for (bool in_place : {false, true}) {
        check_alltoall(comm, dt, seed++, n, true, in_place);
        check_alltoall(comm, dt, seed++, n, false, in_place);
      }
  check_alltoall(comm, DataType::f32, seed++, 300000, false, false);  // megabytes per rank
  comm.barrier().wait();
}

struct Param {
  TransportKind transport;
  int ranks;
  bool regions;  // half the ranks in a second region, across the WAN link
};

class Alltoall : public ::testing::TestWithParam<Param> {};

TEST_P(Alltoall, MatchesReference) {
  const auto prm = GetParam();
  const std::string root = free_root_address();
  auto results = fork_ranks(prm.ranks, 200s, [&](int rank) {
    ::setenv("STRATA_TIMEOUT_S", "60", 1);
    if (prm.regions) ::setenv("STRATA_REGION", rank < prm.ranks / 2 ? "east" : "west", 1);
    CommOptions opts;
    opts.transport = prm.transport;
    Communicator comm(rank, prm.ranks, root, opts);
    all_cases(comm);
  });
  EXPECT_EQ(failures(results), "");
}

INSTANTIATE_TEST_SUITE_P(Layouts, Alltoall,
                         ::testing::Values(Param{TransportKind::tcp, 1, false}, Param{TransportKind::tcp, 2, false},
                                           Param{TransportKind::tcp, 3, false}, Param{TransportKind::tcp, 5, false},
                                           Param{TransportKind::ucx, 4, false}, Param{TransportKind::tcp, 4, true}),
                         [](const auto& info) {
                           return std::string(to_string(info.param.transport)) + "_" +
                                  std::to_string(info.param.ranks) + "ranks" + (info.param.regions ? "_2regions" : "");
                         });

// Refused before anything is sent, naming the argument; the communicator goes on.
TEST(AlltoallErrors, BadArgumentsAreRefusedAndTheCommunicatorStaysUsable) {
  const std::string root = free_root_address();
  auto results = fork_ranks(3, 120s, [&](int rank) {
    ::setenv("STRATA_TIMEOUT_S", "30", 1);
    CommOptions opts;
    opts.transport = TransportKind::tcp;
    Communicator comm(rank, 3, root, opts);
    std::vector<float> a(30), b(30);
    auto refused = [&](const char* what, const std::string& expect, auto&& call) {
      try {
        call();
      } catch (const InvalidArgument& e) {
        require(std::string(e.what()).find(expect) != std::string::npos,
                std::string(what) + ": message '" + e.what() + "' lacks '" + expect + "'");
        return;
      }
      throw std::runtime_error(std::string(what) + " was accepted");
    };
    const std::vector<std::size_t> c3{2, 2, 2}, d3{0, 2, 4}, c2{2, 2};
    refused("too few counts", "send_counts has 2 entries for 3 ranks",
            [&] { comm.alltoallv(a.data(), c2, d3, b.data(), c3, d3, DataType::f32); });
    refused("overlapping recv blocks", "overlap", [&] {
      comm.alltoallv(a.data(), c3, d3, b.data(), c3, std::vector<std::size_t>{0, 1, 4}, DataType::f32);
    });
    std::vector<std::size_t> self = c3;
    self[static_cast<std::size_t>(rank)] = 1;
    refused("own block differs", "this rank's block to itself",
            [&] { comm.alltoallv(a.data(), c3, d3, b.data(), self, d3, DataType::f32); });
    refused("null send", "send is null", [&] { comm.alltoall(nullptr, b.data(), 10, DataType::f32); });
    refused("displacement past the end", "larger than any buffer",
            [&] { comm.alltoallv(a.data(), c3, std::vector<std::size_t>{0, 2, ~std::size_t{0} / 2}, b.data(), c3, d3, DataType::f32); });
    CallOptions forced;
    forced.algorithm = "ring";
    refused("an algorithm", "pairwise exchange", [&] { comm.alltoall(a.data(), b.data(), 10, DataType::f32, forced); });
    check_alltoall(comm, DataType::f32, 99, 10, false, false);  // still works
  });
  EXPECT_EQ(failures(results), "");
}

// Rank 2 expects fewer elements from rank 0 than rank 0 sends: every rank fails within
// the deadline and rank 2's error names rank 0.
TEST(AlltoallErrors, DisagreeingSplitsAreNamed) {
  const std::string root = free_root_address();
  auto results = fork_ranks(3, 120s, [&](int rank) {
    ::setenv("STRATA_TIMEOUT_S", "20", 1);
    CommOptions opts;
    opts.transport = TransportKind::tcp;
    Communicator comm(rank, 3, root, opts);
    std::vector<float> a(30, 1.f), b(30);
    std::vector<std::size_t> sc{4, 4, 4}, rc{4, 4, 4}, d{0, 10, 20};
    if (rank == 2) rc[0] = 2;
    try {
      comm.alltoallv(a.data(), sc, d, b.data(), rc, d, DataType::f32).wait();
    } catch (const Error& e) {
      if (rank == 2)
        require(std::string(e.what()).find("rank 0") != std::string::npos &&
                    std::string(e.what()).find("alltoall") != std::string::npos,
                std::string("rank 2's error does not name rank 0 and the collective: ") + e.what());
      std::printf("failed as expected: %s\n", e.what());
      return;
    }
    if (rank == 2) throw std::runtime_error("rank 2 accepted a block larger than its split");
  });
  for (const auto& r : results) EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
  EXPECT_EQ(results[2].exit_code, 0) << results[2].output;
}

TEST(AlltoallCApi, EvenAndUneven) {
  const StoreProcess store;
  const strataUniqueId id = store.c_id();
  auto results = fork_ranks(3, 120s, [&](int rank) {
    strataComm_t comm = nullptr;
    auto check = [](strataResult_t r, const char* what) {
      if (r != strataSuccess) throw std::runtime_error(std::string(what) + ": " + strataGetLastError(nullptr));
    };
    check(strataCommInitRank(&comm, 3, id, rank), "init");
    std::vector<std::int32_t> send(6), recv(6, -1);
    for (int j = 0; j < 6; ++j) send[static_cast<std::size_t>(j)] = rank * 100 + j;
    check(strataAllToAll(send.data(), recv.data(), 2, strataInt32, comm, nullptr), "strataAllToAll");
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i)
        require(recv[static_cast<std::size_t>(j * 2 + i)] == j * 100 + rank * 2 + i, "strataAllToAll: wrong element");
    // Rank i sends i+1 elements to everyone.
    const size_t sc[3] = {static_cast<size_t>(rank) + 1, static_cast<size_t>(rank) + 1, static_cast<size_t>(rank) + 1};
    const size_t sd[3] = {0, 0, 0}, rc[3] = {1, 2, 3}, rd[3] = {0, 1, 3};
    std::vector<std::int32_t> got(6, -1);
    strataRequest_t req = nullptr;
    check(strataAllToAllv(send.data(), sc, sd, got.data(), rc, rd, strataInt32, comm, &req), "strataAllToAllv");
    check(strataWait(req), "strataWait");
    strataRequestFree(req);
    const std::vector<std::int32_t> want{0, 100, 101, 200, 201, 202};
    require(got == want, "strataAllToAllv: wrong result");
    require(strataAllToAllv(send.data(), nullptr, sd, got.data(), rc, rd, strataInt32, comm, nullptr) == strataInvalidArgument,
            "NULL sendcounts accepted");
    require(std::string(strataGetLastError(nullptr)).find("sendcounts") != std::string::npos, "error does not name sendcounts");
    check(strataCommDestroy(comm), "destroy");
  });
  EXPECT_EQ(failures(results), "");
}

}  // namespace
}  // namespace strata::test
