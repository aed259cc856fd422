// strata declares the few CUDA driver and NCCL entries it uses itself (device/), so that
// libstrata builds without their headers; where the headers are installed, this checks
// those declarations against them at compile time.
#include <gtest/gtest.h>

#include "device/cuda_driver.hpp"
#include "device/nccl_library.hpp"

#if __has_include(<cuda.h>) && __has_include(<nccl.h>)
#include <cuda.h>
#include <nccl.h>
#define STRATA_HAVE_CUDA_HEADERS 1

namespace strata::device {
static_assert(kCudaSuccess == CUDA_SUCCESS && kCudaNotReady == CUDA_ERROR_NOT_READY);
static_assert(kPointerAttributeContext == CU_POINTER_ATTRIBUTE_CONTEXT);
static_assert(kPointerAttributeMemoryType == CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
static_assert(kPointerAttributeDeviceOrdinal == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
static_assert(kMemoryTypeHost == CU_MEMORYTYPE_HOST && kMemoryTypeDevice == CU_MEMORYTYPE_DEVICE &&
              kMemoryTypeUnified == CU_MEMORYTYPE_UNIFIED);
static_assert(kEventDisableTiming == CU_EVENT_DISABLE_TIMING);
static_assert(kHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE && kHostAllocDeviceMap == CU_MEMHOSTALLOC_DEVICEMAP);
static_assert(kStreamNonBlocking == CU_STREAM_NON_BLOCKING && kStreamWaitValueGeq == CU_STREAM_WAIT_VALUE_GEQ);
static_assert(sizeof(CuDevicePtr) == sizeof(CUdeviceptr) && sizeof(CuStream) == sizeof(CUstream));
static_assert(sizeof(NcclUniqueId) == sizeof(ncclUniqueId));
static_assert(kNcclSuccess == ncclSuccess && kNcclInProgress == ncclInProgress);
}  // namespace strata::device
#endif

namespace strata {
namespace {

TEST(DeviceAbi, NcclCodesMatchNcclH) {
#ifndef STRATA_HAVE_CUDA_HEADERS
  GTEST_SKIP() << "cuda.h and nccl.h are not installed here";
#else
  EXPECT_EQ(device::nccl_dtype(DataType::i8), ncclInt8);
  EXPECT_EQ(device::nccl_dtype(DataType::u8), ncclUint8);
  EXPECT_EQ(device::nccl_dtype(DataType::i32), ncclInt32);
  EXPECT_EQ(device::nccl_dtype(DataType::i64), ncclInt64);
  EXPECT_EQ(device::nccl_dtype(DataType::f16), ncclFloat16);
  EXPECT_EQ(device::nccl_dtype(DataType::f32), ncclFloat32);
  EXPECT_EQ(device::nccl_dtype(DataType::f64), ncclFloat64);
  EXPECT_EQ(device::nccl_dtype(DataType::bf16), ncclBfloat16);
  EXPECT_EQ(device::nccl_op(ReduceOp::sum), ncclSum);
  EXPECT_EQ(device::nccl_op(ReduceOp::prod), ncclProd);
  EXPECT_EQ(device::nccl_op(ReduceOp::max), ncclMax);
  EXPECT_EQ(device::nccl_op(ReduceOp::min), ncclMin);
  EXPECT_EQ(device::nccl_op(ReduceOp::avg), ncclAvg);
#endif
}

}  // namespace
}  // namespace strata
