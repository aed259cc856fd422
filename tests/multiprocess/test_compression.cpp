// Compressed allreduce across regions: bitwise-identical results on every rank, errors
// bounded per codec, error feedback that makes the delivered sum track the exact one,
// residual save/restore, mismatch detection and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>

#include "fork_ranks.hpp"
#include "strata/strata.hpp"

namespace strata::test {
namespace {

struct Place {
  const char* region;
  const char* host;
};
const std::vector<Place> k2x2 = {{"us", "u0"}, {"us", "u0"}, {"eu", "e0"}, {"eu", "e0"}};
const std::vector<Place> k3x1 = {{"us", "u0"}, {"eu", "e0"}, {"ap", "a0"}};
const std::vector<Place> kUneven = {{"us", "u0"}, {"us", "u1"}, {"us", "u1"}, {"eu", "e0"}};

// Rank r's input at step t, reproducible by every rank for the reference.
std::vector<float> input(int rank, int step, std::size_t n) {
  std::mt19937 gen(static_cast<unsigned>(rank * 7919 + step * 104729 + 1));
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

std::vector<double> exact_sum(int world, int step, std::size_t n) {
  std::vector<double> s(n, 0.0);
  for (int r = 0; r < world; ++r) {
    const auto v = input(r, step, n);
    for (std::size_t i = 0; i < n; ++i) s[i] += v[i];
  }
  return s;
}

double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Every rank's result, gathered exactly, must be the same bytes.
void require_identical(Communicator& comm, const std::vector<float>& v, const std::string& what) {
  std::vector<float> all(v.size() * static_cast<std::size_t>(comm.size()));
  comm.allgather(v.data(), all.data(), v.size(), DataType::f32).wait();
  for (int r = 0; r < comm.size(); ++r)
    require(v.empty() || std::memcmp(all.data() + static_cast<std::size_t>(r) * v.size(), v.data(), v.size() * sizeof(float)) == 0,
            what + ": rank " + std::to_string(r) + " holds different bits");
}

// exchange: STRATA_COMPRESSED_EXCHANGE (auto lets the model pick; on loopback it mostly
// gathers, so tests of either path force it).
void in_layout(const std::vector<Place>& places, const std::function<void(Communicator&)>& body,
               const char* compress_env = "none", const char* timeout_s = "60", const char* exchange = "auto") {
  const int n = static_cast<int>(places.size());
  const std::string root = free_root_address();
  auto results = fork_ranks(n, std::chrono::seconds(120), [&](int rank) {
    ::setenv("STRATA_REGION", places[static_cast<std::size_t>(rank)].region, 1);
    ::setenv("STRATA_HOST", places[static_cast<std::size_t>(rank)].host, 1);
    ::setenv("STRATA_COMPRESS", compress_env, 1);
    ::setenv("STRATA_TIMEOUT_S", timeout_s, 1);
    ::setenv("STRATA_COMPRESSED_EXCHANGE", exchange, 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    Communicator comm(rank, n, root, o);
    body(comm);
  });
  EXPECT_EQ(failures(results), "");
  for (const auto& r : results) std::cout << r.output;
}

CallOptions with(const std::string& spec, const std::string& key = "t", bool feedback = true) {
  CallOptions o;
  o.compression = Compression::parse(spec);
  o.compression->key = key;
  o.compression->error_feedback = feedback;
  return o;
}

// Relative error of one step (no history) stays within what each codec can promise.
void codec_bounds(const std::vector<Place>& places, const char* exchange = "auto") {
  in_layout(places, [](Communicator& comm) {
    const struct {
      const char* spec;
      double max_rel;
    } specs[] = {{"fp16", 1e-3}, {"bf16", 8e-3}, {"int8", 2e-2}, {"topk:1", 1e-6}, {"topk:0.5+fp16", 0.75},
                 {"topk:0.01+int8", 1.0}, {"topk:0.05+int4,exact", 1.0}};
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{20011}}) {
      for (const auto& s : specs) {
        auto v = input(comm.rank(), static_cast<int>(n), n);
        comm.allreduce(v.data(), v.data(), n, DataType::f32, ReduceOp::sum, with(s.spec, "", false)).wait();
        const std::string what = std::string(s.spec) + " n=" + std::to_string(n);
        require_identical(comm, v, what);
        const double err = rel_error(v, exact_sum(comm.size(), static_cast<int>(n), n));
        require(err <= s.max_rel, what + ": relative error " + std::to_string(err));
      }
    }
  }, "none", "60", exchange);
}

TEST(Compression, CodecBoundsTwoRegionsSplitRail) { codec_bounds(k2x2); }
TEST(Compression, CodecBoundsThreeRegionsGathered) { codec_bounds(k3x1, "gather"); }
TEST(Compression, CodecBoundsThreeRegionsSplitAndReduce) { codec_bounds(k3x1, "reduce_scatter"); }
TEST(Compression, CodecBoundsUnevenLeaders) { codec_bounds(kUneven); }

// Over T steps, what error feedback delivers sums to the inputs' sum up to the residual
// still held back, so the accumulated error stays small; without it, it grows.
TEST(Compression, ErrorFeedbackTracksTheExactSum) {
  in_layout(k2x2, [](Communicator& comm) {
    constexpr std::size_t n = 4000;
    constexpr int steps = 40;
    auto run = [&](bool feedback) {
      std::vector<float> delivered(n, 0.0f);
      std::vector<double> exact(n, 0.0);
      for (int t = 0; t < steps; ++t) {
        auto v = input(comm.rank(), t, n);
        comm.allreduce(v.data(), v.data(), n, DataType::f32, ReduceOp::sum,
                       with("topk:0.05+int8", feedback ? "ef" : "none", feedback))
            .wait();
        const auto e = exact_sum(comm.size(), t, n);
        for (std::size_t i = 0; i < n; ++i) {
          delivered[i] += v[i];
          exact[i] += e[i];
        }
      }
      return rel_error(delivered, exact);
    };
    const double with_ef = run(true), without = run(false);
    require(with_ef < 0.5 * without, "error feedback " + std::to_string(with_ef) + " vs none " +
                                         std::to_string(without));
  });
}

// The residuals of one key as one vector of the tensor's length (save_residuals'
// snapshot: "SQEF", u32 version, u64 entries; per entry u32 key bytes, key, u64 offset,
// u64 length, length floats; u64 checksum).
std::vector<double> residual_of(const std::vector<std::byte>& snap, const std::string& key, std::size_t n) {
  std::vector<double> r(n, 0.0);
  std::size_t at = 8;
  auto take = [&](auto& v) {
    require(at + sizeof v <= snap.size(), "residual snapshot ends early");
    std::memcpy(&v, snap.data() + at, sizeof v);
    at += sizeof v;
  };
  std::uint64_t entries = 0;
  take(entries);
  for (std::uint64_t e = 0; e < entries; ++e) {
    std::uint32_t kb = 0;
    take(kb);
    const std::string k(reinterpret_cast<const char*>(snap.data() + at), kb);
    at += kb;
    std::uint64_t off = 0, len = 0;
    take(off);
    take(len);
    for (std::uint64_t i = 0; i < len; ++i) {
      float f = 0;
      take(f);
      if (k == key) r[off + i] += f;
    }
  }
  return r;
}

// Four regions, reduce_scatter: every range owner re-sparsifies the sum it reduced and
// keeps what that drops. Over many calls, what every rank received plus every rank's
// residual is what was put in, exactly (integer inputs, top-k with f32 values: every sum
// is exact). Gathered, only each member's own encoding drops anything: the same holds.
void residuals_keep_everything(const char* exchange) {
  const std::vector<Place> k4 = {{"us", "u0"}, {"eu", "e0"}, {"ap", "a0"}, {"sa", "s0"}};
  in_layout(k4, [](Communicator& comm) {
    constexpr std::size_t n = 1001;
    constexpr int steps = 30;
    std::vector<double> delivered(n, 0.0), put_in(n, 0.0);
    for (int t = 0; t < steps; ++t) {
      std::vector<double> all_inputs(n, 0.0);
      for (int r = 0; r < comm.size(); ++r) {
        std::mt19937 gen(static_cast<unsigned>(r * 31 + t * 1009 + 7));
        for (std::size_t i = 0; i < n; ++i) all_inputs[i] += static_cast<double>(static_cast<int>(gen() % 17) - 8);
      }
      std::mt19937 mine(static_cast<unsigned>(comm.rank() * 31 + t * 1009 + 7));
      std::vector<float> v(n);
      for (auto& x : v) x = static_cast<float>(static_cast<int>(mine() % 17) - 8);
      comm.allreduce(v.data(), v.data(), n, DataType::f32, ReduceOp::sum, with("topk:0.05", "cons")).wait();
      require_identical(comm, v, "step " + std::to_string(t));
      for (std::size_t i = 0; i < n; ++i) {
        delivered[i] += v[i];
        put_in[i] += all_inputs[i];
      }
    }
    const auto mine = residual_of(comm.save_residuals(), "cons", n);
    std::vector<double> held(n, 0.0);
    comm.allreduce(mine.data(), held.data(), n, DataType::f64, ReduceOp::sum).wait();
    std::size_t off = 0;
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double gap = std::abs(delivered[i] + held[i] - put_in[i]);
      off += gap != 0;
      worst = std::max(worst, gap);
    }
    require(off == 0, std::to_string(off) + " of " + std::to_string(n) + " elements do not add up (worst by " +
                          std::to_string(worst) + ")");
    // And compression did hold something back, or the test would prove nothing.
    double held_norm = 0;
    for (double h : held) held_norm += std::abs(h);
    require(held_norm > 0, "no residual held back");
  }, "none", "60", exchange);
}

TEST(Compression, ReSparsifyingKeepsEverythingInTheResiduals) { residuals_keep_everything("reduce_scatter"); }
TEST(Compression, GatheringKeepsEverythingInTheResiduals) { residuals_keep_everything("gather"); }

// The exchange STRATA_COMPRESSED_EXCHANGE names is the one that runs: four regions,
// gathering sends each member's encoding to the three others, reduce_scatter about
// 2 x 3/4 of one encoding, so gathering sends about twice as much.
TEST(Compression, TheExchangeSetsTheTraffic) {
  const std::vector<Place> k4 = {{"us", "u0"}, {"eu", "e0"}, {"ap", "a0"}, {"sa", "s0"}};
  const std::string roots[2] = {free_root_address(), free_root_address()};
  auto results = fork_ranks(4, std::chrono::seconds(120), [&](int rank) {
    ::setenv("STRATA_REGION", k4[static_cast<std::size_t>(rank)].region, 1);
    ::setenv("STRATA_HOST", k4[static_cast<std::size_t>(rank)].host, 1);
    ::setenv("STRATA_TIMEOUT_S", "60", 1);
    constexpr std::size_t n = 200000;
    std::uint64_t sent[2] = {};
    for (int i = 0; i < 2; ++i) {
      ::setenv("STRATA_COMPRESSED_EXCHANGE", i == 0 ? "gather" : "reduce_scatter", 1);
      CommOptions o;
      o.transport = TransportKind::tcp;
      Communicator comm(rank, 4, roots[i], o);
      auto v = input(comm.rank(), 3, n);
      const TrafficStats before = comm.traffic();
      comm.allreduce(v.data(), v.data(), n, DataType::f32, ReduceOp::sum, with("topk:0.01+int8", "", false)).wait();
      sent[i] = comm.traffic().wan_bytes_sent - before.wan_bytes_sent;
      require_identical(comm, v, i == 0 ? "gather" : "reduce_scatter");
    }
    const double ratio = static_cast<double>(sent[0]) / static_cast<double>(sent[1]);
    require(ratio > 1.6 && ratio < 2.4, "gathered " + std::to_string(sent[0]) + " B, reduce-scattered " +
                                           std::to_string(sent[1]) + " B: ratio " + std::to_string(ratio));
  });
  EXPECT_EQ(failures(results), "");
}

// Top-k at a density where indices and values outgrow the vector itself goes dense and
// exact: fewer bytes over the WAN than the sparse form would take, and no error.
TEST(Compression, DenseWhenTheSparseFormWouldBeLarger) {
  in_layout(k2x2, [](Communicator& comm) {
    constexpr std::size_t n = 20000;  // each rank's cross-region shard: n / 2 floats
    auto v = input(comm.rank(), 5, n);
    const TrafficStats before = comm.traffic();
    comm.allreduce(v.data(), v.data(), n, DataType::f32, ReduceOp::sum, with("topk:0.99")).wait();
    const std::uint64_t sent = comm.traffic().wan_bytes_sent - before.wan_bytes_sent;
    // Dense: 4 bytes a float plus a 24-byte header, and at most one 32-byte fingerprint.
    require(sent <= n / 2 * 4 + 24 + 32, "sent " + std::to_string(sent) + " bytes over the WAN");
    const double err = rel_error(v, exact_sum(comm.size(), 5, n));
    require(err < 1e-6, "relative error " + std::to_string(err));
    require_identical(comm, v, "topk:0.99");
  });
}

// A checkpoint of the residuals, restored after a reset, continues bit for bit.
TEST(Compression, ResidualsSaveAndRestore) {
  in_layout(k2x2, [](Communicator& comm) {
    constexpr std::size_t n = 3001;
    auto step = [&](int t) {
      auto v = input(comm.rank(), t, n);
      comm.allreduce(v.data(), v.data(), n, DataType::f32, ReduceOp::avg, with("topk:0.02+int8", "w")).wait();
      return v;
    };
    step(0);
    const auto saved = comm.save_residuals();
    require(!saved.empty(), "empty snapshot");
    const auto first = step(1);
    comm.reset_residuals();
    comm.restore_residuals(saved);
    const auto again = step(1);
    require(std::memcmp(first.data(), again.data(), n * sizeof(float)) == 0, "restored run differs");
    comm.reset_residuals("w");
    const auto fresh = step(1);
    require(std::memcmp(first.data(), fresh.data(), n * sizeof(float)) != 0, "reset kept the residual");
    std::vector<std::byte> junk(saved.size(), std::byte{7});
    try {
      comm.restore_residuals(junk);
      require(false, "junk snapshot accepted");
    } catch (const InvalidArgument&) {
    }
  });
}

TEST(Compression, DefaultFromEnvironment) {
  in_layout(k2x2, [](Communicator& comm) {
    constexpr std::size_t n = 20011;
    auto v = input(comm.rank(), 3, n);
    comm.allreduce(v.data(), v.data(), n, DataType::f32, ReduceOp::sum).wait();
    const double err = rel_error(v, exact_sum(comm.size(), 3, n));
    require(err > 1e-5 && err < 2e-2, "STRATA_COMPRESS=int8 not applied: error " + std::to_string(err));
    require_identical(comm, v, "env int8");
    // Other collectives and other dtypes stay exact.
    std::vector<double> d(5, 1.0);
    comm.allreduce(d.data(), d.data(), d.size(), DataType::f64, ReduceOp::sum).wait();
    require(d[0] == comm.size(), "f64 allreduce under STRATA_COMPRESS");
  }, "int8");
}

TEST(Compression, RanksAskingForDifferentCompressionIsAMismatch) {
  in_layout(k2x2, [](Communicator& comm) {
    std::vector<float> v(1000, 1.0f);
    try {
      comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum,
                     comm.rank() == 1 ? with("int8") : CallOptions{})
          .wait();
    } catch (const MismatchError& e) {
      std::cout << "rank " << comm.rank() << ": " << e.what() << std::endl;
      return;
    } catch (const Error& e) {
      std::cout << "rank " << comm.rank() << " (other error): " << e.what() << std::endl;
      return;  // ranks not next to the mismatch see the abort that follows it
    }
    require(false, "mismatched compression went unnoticed");
  }, "none", "10");  // peers that left say goodbye over the WAN; the deadline only bounds it
}

TEST(Compression, BadRequestsNameTheProblem) {
  in_layout(k2x2, [](Communicator& comm) {
    auto expect = [&](const std::function<void()>& f, const std::string& needle) {
      try {
        f();
      } catch (const InvalidArgument& e) {
        require(std::string(e.what()).find(needle) != std::string::npos, e.what());
        return;
      }
      require(false, "no error for " + needle);
    };
    std::vector<double> d(4);
    std::vector<float> f(4);
    expect([&] { comm.allreduce(d.data(), d.data(), 4, DataType::f64, ReduceOp::sum, with("int8")); },
           "allreduce on rank " + std::to_string(comm.rank()) + ": compression int8 needs f32 data");
    expect([&] { comm.allreduce(f.data(), f.data(), 4, DataType::f32, ReduceOp::max, with("int8")); },
           "needs op sum or avg");
    expect([&] { Compression::parse("topk:2"); }, "2");
    expect([&] { Compression::parse("zip"); }, "zip");
    comm.barrier().wait();  // nothing was queued by the refused calls
  });
}

}  // namespace
}  // namespace strata::test
