// The GPU layer's host-side parts: CUDA and NCCL opened at run time with errors that name
// what is missing, where a buffer lives, the emulated copy stream the staging is tested
// on, and the argument checks of device buffers (a one-rank communicator). Every test is
// its own process (gtest_discover_tests), so each opens the libraries afresh.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "device/copy_stream.hpp"
#include "device/cuda_driver.hpp"
#include "device/cuda_kernels.hpp"
#include "device/memory.hpp"
#include "device/nccl_library.hpp"
#include "device/shared_library.hpp"
#include "fork_ranks.hpp"
#include "strata/strata.h"
#include "strata/strata.hpp"

namespace strata {
namespace {

TEST(DeviceLayer, AMissingLibraryIsNamed) {
  device::SharedLibrary lib({"libstrata-no-such-library.so.7"});
  EXPECT_FALSE(lib.open());
  EXPECT_NE(lib.why().find("libstrata-no-such-library.so.7"), std::string::npos) << lib.why();
}

TEST(DeviceLayer, NoDriverMeansHostMemoryWithoutLoadingIt) {
  // This process never loaded CUDA's driver, so no buffer can be device memory, and
  // asking must not load it.
  std::vector<float> v(16);
  EXPECT_EQ(device::placement_of(v.data()).kind, device::MemoryKind::host);
  EXPECT_EQ(device::driver_in_use(), nullptr);
  EXPECT_EQ(::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), nullptr);
}

TEST(DeviceLayer, ADriverLoadedLaterIsNoticed) {
  std::vector<float> v(16);
  EXPECT_EQ(device::driver_in_use(), nullptr);
  // The toolkit's stub driver (soname libcuda.so.1) stands in for the one a framework
  // would load after the communicator was made.
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (::access(stub.c_str(), R_OK) != 0) GTEST_SKIP() << "no CUDA toolkit stub driver at " << stub;
  ASSERT_NE(::dlopen(stub.c_str(), RTLD_NOW | RTLD_LOCAL), nullptr);
  // Found and opened now; the stub then fails cuInit, so memory is still the host's.
  EXPECT_EQ(device::driver_in_use(), nullptr);
  EXPECT_NE(device::why_no_driver().find("cuInit failed"), std::string::npos) << device::why_no_driver();
  EXPECT_EQ(device::placement_of(v.data()).kind, device::MemoryKind::host);
}

TEST(DeviceLayer, ADriverThatCannotInitialiseSaysSo) {
  // CUDA's toolkit ships a stub driver that links but answers every call with an error,
  // as a machine with the toolkit and no GPU does.
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (::access(stub.c_str(), R_OK) != 0) GTEST_SKIP() << "no CUDA toolkit stub driver at " << stub;
  EXPECT_EQ(device::cuda_driver(stub), nullptr);
  const std::string why = device::why_no_driver();
  EXPECT_NE(why.find("cuInit failed"), std::string::npos) << why;
  EXPECT_NE(why.find(stub), std::string::npos) << why;
}

TEST(DeviceLayer, AMissingDriverIsNamed) {
  EXPECT_EQ(device::cuda_driver("/nonexistent/libcuda.so.1"), nullptr);
  EXPECT_NE(device::why_no_driver().find("/nonexistent/libcuda.so.1"), std::string::npos) << device::why_no_driver();
}

TEST(DeviceLayer, NcclOpensWithoutAGpu) {
  // ncclGetVersion needs no device: the table is complete and the version is read.
  const char* path = "/usr/local/cuda/lib/libnccl.so.2";
  if (::access(path, R_OK) != 0) GTEST_SKIP() << "no NCCL at " << path;
  const device::NcclLibrary* n = device::nccl_library(path);
  ASSERT_NE(n, nullptr) << device::why_no_nccl();
  EXPECT_GE(n->version, 21000);
  EXPECT_EQ(device::nccl_dtype(DataType::bf16), 9);
  EXPECT_EQ(device::nccl_op(ReduceOp::avg), 4);
}

TEST(DeviceLayer, AMissingNcclIsNamedWithTheSetting) {
  EXPECT_EQ(device::nccl_library("/nonexistent/libnccl.so.2"), nullptr);
  const std::string why = device::why_no_nccl();
  EXPECT_NE(why.find("/nonexistent/libnccl.so.2"), std::string::npos) << why;
  EXPECT_NE(why.find("STRATA_NCCL_LIBRARY"), std::string::npos) << why;
}

TEST(DeviceLayer, TheKernelLibraryOpensWithoutAGpu) {
  // Built beside libstrata where nvcc is found; loading it needs no device.
  const char* built = STRATA_TEST_CUDA_KERNELS;
  if (*built == '\0') GTEST_SKIP() << "libstrata-cuda is not built here (no nvcc)";
  const device::CudaKernels* k = device::cuda_kernels(built);
  ASSERT_NE(k, nullptr) << device::why_no_kernels();
  EXPECT_NE(k->encode_values, nullptr);
}

TEST(DeviceLayer, AMissingKernelLibraryIsNamed) {
  EXPECT_EQ(device::cuda_kernels("/nonexistent/libstrata-cuda.so"), nullptr);
  EXPECT_NE(device::why_no_kernels().find("/nonexistent/libstrata-cuda.so"), std::string::npos)
      << device::why_no_kernels();
}

TEST(DeviceLayer, EmulatedRangesArePlacedOnTheEmulatedDevice) {
  std::vector<char> a(100), b(100);
  device::emulate(a.data(), a.size());
  EXPECT_EQ(device::placement_of(a.data()).kind, device::MemoryKind::device);
  EXPECT_EQ(device::placement_of(a.data() + 99).device, device::kEmulatedDevice);
  EXPECT_EQ(device::placement_of(b.data()).kind, device::MemoryKind::host);
  device::forget(a.data());
  EXPECT_EQ(device::placement_of(a.data()).kind, device::MemoryKind::host);
}

TEST(DeviceLayer, EmulatedCopiesRunInOrderAndMarkersWaitForThem) {
  device::CopyCounters counted;
  auto streams = device::host_copy_streams(counted);
  auto s = streams->open({}, nullptr);
  std::vector<int> dev(1 << 20), host(1 << 20);
  std::iota(dev.begin(), dev.end(), 0);
  auto* staging = static_cast<int*>(s->staging(0, dev.size() * sizeof(int)));
  s->to_host(staging, dev.data(), dev.size() * sizeof(int));
  // A later copy reads what the earlier one wrote: the stream keeps their order.
  s->to_host(host.data(), staging, host.size() * sizeof(int));
  auto m = s->mark();
  while (!m->done()) {
  }
  EXPECT_EQ(host, dev);
  EXPECT_EQ(counted.to_host, 2 * dev.size() * sizeof(int));
  EXPECT_EQ(counted.to_device, 0u);
  // Staging of a slot is kept for later calls, and grows.
  EXPECT_EQ(s->staging(0, 16), staging);
  EXPECT_NE(s->staging(0, dev.size() * sizeof(int) * 3), nullptr);
}

class DeviceArguments : public ::testing::Test {
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
Communicator* DeviceArguments::comm_ = nullptr;

template <class F>
std::string invalid(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no InvalidArgument thrown";
}

TEST_F(DeviceArguments, MixingHostAndDeviceBuffersIsRefused) {
  std::vector<float> dev(64), host(64);
  device::emulate(dev.data(), dev.size() * sizeof(float));
  const auto e = invalid([&] { comm_->allreduce(dev.data(), host.data(), 64, DataType::f32, ReduceOp::sum); });
  EXPECT_NE(e.find("allreduce on rank 0"), std::string::npos) << e;
  EXPECT_NE(e.find("send is emulated device memory but recv is host memory"), std::string::npos) << e;
  const auto g = invalid([&] { comm_->allgather(host.data(), dev.data(), 64, DataType::f32); });
  EXPECT_NE(g.find("send is host memory but recv is emulated device memory"), std::string::npos) << g;
  device::forget(dev.data());
}

TEST_F(DeviceArguments, PointToPointTakesHostMemoryOnly) {
  std::vector<float> dev(8);
  device::emulate(dev.data(), dev.size() * sizeof(float));
  const auto e = invalid([&] { comm_->send(dev.data(), 8, DataType::f32, 0); });
  EXPECT_NE(e.find("send on rank 0: buf is device memory"), std::string::npos) << e;
  device::forget(dev.data());
}

TEST_F(DeviceArguments, DeviceBuffersGoThroughTheStaging) {
  // One rank: the result is the input, copied to the host staging and back.
  std::vector<float> in(1000), out(1000, -1.f);
  std::iota(in.begin(), in.end(), 1.f);
  device::emulate(in.data(), in.size() * sizeof(float));
  device::emulate(out.data(), out.size() * sizeof(float));
  comm_->allreduce(in.data(), out.data(), in.size(), DataType::f32, ReduceOp::sum).wait();
  comm_->allreduce(out.data(), out.data(), 0, DataType::f32, ReduceOp::sum).wait();  // nothing to stage
  device::forget(in.data());
  device::forget(out.data());
  EXPECT_EQ(out, in);
  // Staged whole: in to the host, out back.
  EXPECT_EQ(comm_->traffic().device_to_host_bytes, in.size() * sizeof(float));
  EXPECT_EQ(comm_->traffic().host_to_device_bytes, out.size() * sizeof(float));
}

TEST(DeviceCApi, DeviceBuffersTakeTheCommunicatorsStream) {
  strataUniqueId id;
  ASSERT_EQ(strataGetUniqueId(&id), strataSuccess);
  strataComm_t comm = nullptr;
  ASSERT_EQ(strataCommInitRank(&comm, 1, id, 0), strataSuccess) << strataGetLastError(nullptr);
  // The emulation has no stream to order on; the stream is kept and the call staged.
  int stream_stand_in = 0;
  ASSERT_EQ(strataCommSetStream(comm, &stream_stand_in), strataSuccess);
  std::vector<double> in(37), out(37, -1.0);
  std::iota(in.begin(), in.end(), -5.0);
  device::emulate(in.data(), in.size() * sizeof(double));
  device::emulate(out.data(), out.size() * sizeof(double));
  EXPECT_EQ(strataAllReduce(in.data(), out.data(), in.size(), strataDouble, strataSum, comm, nullptr), strataSuccess)
      << strataGetLastError(nullptr);
  std::vector<double> host(37);
  EXPECT_EQ(strataAllReduce(in.data(), host.data(), in.size(), strataDouble, strataSum, comm, nullptr),
            strataInvalidArgument);
  EXPECT_NE(std::string(strataGetLastError(nullptr)).find("host memory"), std::string::npos);
  device::forget(in.data());
  device::forget(out.data());
  EXPECT_EQ(out, in);
  EXPECT_EQ(strataCommDestroy(comm), strataSuccess);
}

}  // namespace
}  // namespace strata
