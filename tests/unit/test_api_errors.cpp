// Bad input is rejected before anything is sent, with a message naming the argument,
// the collective and the rank; the communicator stays usable afterwards.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "fork_ranks.hpp"
#include "strata/server.hpp"
#include "strata/strata.h"
#include "strata/strata.hpp"

namespace strata {
namespace {

class ApiErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CommOptions o;
    o.transport = TransportKind::tcp;
    o.timeout = std::chrono::seconds(10);
    comm_ = new Communicator(0, 1, test::free_root_address(), o);
  }
  static void TearDownTestSuite() { delete comm_; }
  static Communicator* comm_;
};
Communicator* ApiErrors::comm_ = nullptr;

template <class F>
std::string invalid(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no InvalidArgument thrown";
}

TEST_F(ApiErrors, NullBuffersAreNamed) {
  std::vector<float> b(4);
  EXPECT_EQ(invalid([&] { comm_->allreduce(nullptr, b.data(), 4, DataType::f32, ReduceOp::sum); }),
            "allreduce on rank 0: send is null but count is non-zero");
  EXPECT_EQ(invalid([&] { comm_->allgather(b.data(), nullptr, 4, DataType::f32); }),
            "allgather on rank 0: recv is null but count is non-zero");
  // A zero count needs no buffer.
  comm_->allreduce(nullptr, nullptr, 0, DataType::f32, ReduceOp::sum).wait();
}

TEST_F(ApiErrors, AvgNeedsAFloatingType) {
  std::vector<int> b(4);
  EXPECT_EQ(invalid([&] { comm_->allreduce(b.data(), b.data(), 4, DataType::i32, ReduceOp::avg); }),
            "allreduce on rank 0: op avg needs a floating dtype, got i32");
}

TEST_F(ApiErrors, EnumsOutOfRange) {
  std::vector<float> b(4);
  EXPECT_EQ(invalid([&] { comm_->allreduce(b.data(), b.data(), 4, static_cast<DataType>(42), ReduceOp::sum); }),
            "allreduce on rank 0: dtype 42 is not a DataType");
  EXPECT_EQ(invalid([&] { comm_->reduce(b.data(), b.data(), 4, DataType::f32, static_cast<ReduceOp>(9), 0); }),
            "reduce on rank 0: op 9 is not a ReduceOp");
}

TEST_F(ApiErrors, RootsAndPeersOutOfRange) {
  std::vector<float> b(4);
  EXPECT_EQ(invalid([&] { comm_->broadcast(b.data(), b.data(), 4, DataType::f32, 1); }),
            "broadcast on rank 0: root 1 is out of range for 1 ranks");
  EXPECT_EQ(invalid([&] { comm_->send(b.data(), 4, DataType::f32, -1); }),
            "send on rank 0: peer -1 is out of range for 1 ranks");
}

TEST_F(ApiErrors, PartialOverlapIsRejected) {
  std::vector<float> b(16);
  EXPECT_EQ(invalid([&] { comm_->allreduce(b.data(), b.data() + 1, 8, DataType::f32, ReduceOp::sum); }),
            "allreduce on rank 0: send and recv buffers overlap without being the in-place layout");
}

TEST_F(ApiErrors, MisalignedElements) {
  std::vector<double> b(4);
  auto* odd = reinterpret_cast<char*>(b.data()) + 1;
  EXPECT_EQ(invalid([&] { comm_->allreduce(odd, odd, 2, DataType::f64, ReduceOp::sum); }),
            "allreduce on rank 0: send is not aligned to its 8-byte elements");
}

TEST_F(ApiErrors, OverflowingCount) {
  std::vector<float> b(1);
  EXPECT_NE(invalid([&] { comm_->allreduce(b.data(), b.data(), SIZE_MAX / 2, DataType::f64, ReduceOp::sum); })
                .find("larger than any buffer can be"),
            std::string::npos);
}

// Byte sizes that fit size_t but no buffer (above PTRDIFF_MAX), and buffers whose end
// would wrap past the top of the address space, are refused on every collective before
// anything is copied: on one rank the collective would otherwise be a memcpy of that size.
TEST_F(ApiErrors, HugeCountsAreRefusedOnEveryCollective) {
  std::vector<float> a(16), b(16);
  const std::size_t counts[] = {SIZE_MAX / 4, SIZE_MAX / 4 + 1, SIZE_MAX, PTRDIFF_MAX / 4 + 1};
  for (const std::size_t n : counts) {
    const std::string count = std::to_string(n);
    const auto huge = [&](const std::string& what) {
      EXPECT_NE(what.find("larger than any buffer can be"), std::string::npos) << "count " << count << ": " << what;
    };
    huge(invalid([&] { comm_->allreduce(a.data(), b.data(), n, DataType::f32, ReduceOp::sum); }));
    huge(invalid([&] { comm_->allreduce(a.data(), a.data(), n, DataType::f32, ReduceOp::sum); }));
    huge(invalid([&] { comm_->reduce_scatter(a.data(), b.data(), n, DataType::f32, ReduceOp::sum); }));
    huge(invalid([&] { comm_->allgather(a.data(), b.data(), n, DataType::f32); }));
    huge(invalid([&] { comm_->broadcast(a.data(), b.data(), n, DataType::f32, 0); }));
    huge(invalid([&] { comm_->reduce(a.data(), b.data(), n, DataType::f32, ReduceOp::sum, 0); }));
    huge(invalid([&] { comm_->send(a.data(), n, DataType::f32, 0); }));
    huge(invalid([&] { comm_->recv(a.data(), n, DataType::f32, 0); }));
  }
  // A size that is fine but a pointer whose buffer would wrap around.
  auto* top = reinterpret_cast<float*>(UINTPTR_MAX - 15);  // 4-byte aligned, 16 bytes below the end
  const auto wraps = [&](const std::string& what) {
    EXPECT_NE(what.find("runs past the end of the address space"), std::string::npos) << what;
  };
  wraps(invalid([&] { comm_->allreduce(top, b.data(), 8, DataType::f32, ReduceOp::sum); }));
  wraps(invalid([&] { comm_->allgather(a.data(), top, 8, DataType::f32); }));
  wraps(invalid([&] { comm_->reduce_scatter(top, b.data(), 8, DataType::f32, ReduceOp::sum); }));
  wraps(invalid([&] { comm_->broadcast(top, top, 8, DataType::f32, 0); }));
  wraps(invalid([&] { comm_->send(top, 8, DataType::f32, 0); }));
  // Nothing was written and the communicator still works.
  EXPECT_EQ(b, std::vector<float>(16));
}

TEST_F(ApiErrors, CommunicatorStillWorksAfterBadCalls) {
  std::vector<float> in{1, 2, 3}, out(3);
  comm_->allreduce(in.data(), out.data(), 3, DataType::f32, ReduceOp::sum).wait();
  EXPECT_EQ(out, in);
}

TEST(Construction, BadRankAndSize) {
  EXPECT_EQ(invalid([] { Communicator(3, 2, "127.0.0.1:1"); }), "rank 3 is out of range for size 2");
  EXPECT_EQ(invalid([] { Communicator(0, 1, "nonsense"); }), "rendezvous address 'nonsense' is not host:port");
}

TEST(Construction, UnknownTransportVariable) {
  ::setenv("STRATA_TRANSPORT", "carrier-pigeon", 1);
  EXPECT_EQ(invalid([] { Communicator(0, 1, test::free_root_address()); }),
            "communicator creation on rank 0: this rank refuses its settings: STRATA_TRANSPORT='carrier-pigeon' is not one of ucx, tcp");
  ::unsetenv("STRATA_TRANSPORT");
}

TEST(Construction, FromEnvWithoutLauncher) {
  for (const char* v : {"STRATA_RANK", "STRATA_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"})
    ::unsetenv(v);
  EXPECT_NE(invalid([] { Communicator::from_env(); }).find("no launcher found"), std::string::npos);
  ::setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  ::unsetenv("STRATA_ROOT");
  ::unsetenv("MASTER_ADDR");
  EXPECT_NE(invalid([] { Communicator::from_env(); }).find("no rendezvous address"), std::string::npos);
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
}

// Checked at creation with every other setting, and published to the other ranks first.
TEST(Construction, SettingsOutsideTheirRangeAreNamed) {
  ::setenv("STRATA_CHUNK_BYTES", "100", 1);
  EXPECT_EQ(invalid([] { Communicator(0, 1, test::free_root_address()); }),
            "communicator creation on rank 0: this rank refuses its settings: STRATA_CHUNK_BYTES=100 is outside [4096, 1073741824]");
  ::setenv("STRATA_CHUNK_BYTES", "4k", 1);
  EXPECT_EQ(invalid([] { Communicator(0, 1, test::free_root_address()); }), "communicator creation on rank 0: this rank refuses its settings: STRATA_CHUNK_BYTES='4k' is not an integer");
  ::unsetenv("STRATA_CHUNK_BYTES");
  ::setenv("STRATA_TIMEOUT_S", "0", 1);
  EXPECT_EQ(invalid([] { Communicator(0, 1, test::free_root_address()); }), "communicator creation on rank 0: this rank refuses its settings: STRATA_TIMEOUT_S=0 is outside [0.001, 1000000000]");
  ::unsetenv("STRATA_TIMEOUT_S");
}

TEST(Construction, ServerProcessServesInsteadOfJoining) {
  ::setenv("STRATA_ROLE", "server", 1);
  EXPECT_TRUE(is_server_process());
  // The library never ends the process for a server: from_env says what to call instead.
  EXPECT_NE(invalid([] { Communicator::from_env(); }).find("call strata::serve_from_env()"), std::string::npos);
  int yes = -1;
  EXPECT_EQ(strataIsServerProcess(&yes), strataSuccess);
  EXPECT_EQ(yes, 1);
  ::setenv("STRATA_ROLE", "scheduler", 1);
  EXPECT_EQ(invalid([] { is_server_process(); }), "STRATA_ROLE='scheduler' is not one of worker, server");
  EXPECT_EQ(strataIsServerProcess(&yes), strataInvalidArgument);
  EXPECT_EQ(strataIsServerProcess(nullptr), strataInvalidArgument);
  ::unsetenv("STRATA_ROLE");
  EXPECT_FALSE(is_server_process());
}

TEST(Construction, UniqueIdRoundTrip) {
  const auto id = UniqueId::create();
  EXPECT_NE(id.root().find(':'), std::string::npos);
  Communicator c(id, 0, 1);
  std::vector<double> x{2.5};
  c.allreduce(x.data(), x.data(), 1, DataType::f64, ReduceOp::avg).wait();
  EXPECT_EQ(x[0], 2.5);
  UniqueId garbage;
  EXPECT_NE(invalid([&] { Communicator(garbage, 0, 1); }).find("unique id"), std::string::npos);
}

}  // namespace
}  // namespace strata
