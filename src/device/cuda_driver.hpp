// CUDA's driver API as strata uses it, opened at run time from libcuda.so.1 (the driver
// every CUDA machine has; the runtime library may not be on the loader's path). Only
// the entry points below are taken, declared here with the driver's stable C ABI so
// that nothing in libstrata needs CUDA's headers; tests/unit/test_device_abi.cpp checks
// the values against cuda.h where it is installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::device {

using CuResult = int;
using CuStream = void*;  // a cudaStream_t is the same handle
using CuEvent = void*;
using CuContext = void*;
using CuDevicePtr = unsigned long long;

inline constexpr CuResult kCudaSuccess = 0;
inline constexpr CuResult kCudaNotReady = 600;
inline constexpr int kPointerAttributeContext = 1;
inline constexpr int kPointerAttributeMemoryType = 2;
inline constexpr int kPointerAttributeDeviceOrdinal = 9;
inline constexpr unsigned kMemoryTypeHost = 1, kMemoryTypeDevice = 2, kMemoryTypeUnified = 4;
inline constexpr unsigned kEventDisableTiming = 2;
inline constexpr unsigned kHostAllocPortable = 1, kHostAllocDeviceMap = 2;
inline constexpr unsigned kStreamNonBlocking = 1;
inline constexpr unsigned kStreamWaitValueGeq = 0;

struct CudaDriver {
  CuResult (*init)(unsigned flags);
  CuResult (*get_error_string)(CuResult, const char**);
  CuResult (*pointer_get_attribute)(void* data, int attribute, CuDevicePtr ptr);
  CuResult (*ctx_get_current)(CuContext*);
  CuResult (*device_get)(int* device, int ordinal);
  CuResult (*device_primary_ctx_retain)(CuContext*, int device);
  CuResult (*ctx_set_current)(CuContext);
  CuResult (*memcpy_dtoh_async)(void* dst, CuDevicePtr src, std::size_t bytes, CuStream s);
  CuResult (*memcpy_htod_async)(CuDevicePtr dst, const void* src, std::size_t bytes, CuStream s);
  CuResult (*memcpy_dtod_async)(CuDevicePtr dst, CuDevicePtr src, std::size_t bytes, CuStream s);
  CuResult (*event_create)(CuEvent*, unsigned flags);
  CuResult (*event_record)(CuEvent, CuStream);
  CuResult (*event_query)(CuEvent);
  CuResult (*event_synchronize)(CuEvent);
  CuResult (*event_destroy)(CuEvent);
  CuResult (*stream_wait_event)(CuStream, CuEvent, unsigned flags);
  CuResult (*mem_alloc)(CuDevicePtr*, std::size_t);
  CuResult (*mem_free)(CuDevicePtr);
  CuResult (*mem_host_alloc)(void**, std::size_t, unsigned flags);
  CuResult (*mem_free_host)(void*);
  CuResult (*mem_host_get_device_pointer)(CuDevicePtr*, void* host, unsigned flags);
  CuResult (*stream_create)(CuStream*, unsigned flags);
  CuResult (*stream_destroy)(CuStream);
  CuResult (*stream_wait_value32)(CuStream, CuDevicePtr addr, std::uint32_t value, unsigned flags);
  CuResult (*stream_write_value32)(CuStream, CuDevicePtr addr, std::uint32_t value, unsigned flags);

  // "cuMemcpyDtoHAsync failed: CUDA_ERROR_... (what)", for errors.
  std::string describe(CuResult r, const char* call) const;
  // Throws TransportError naming the call and `what` unless r is success.
  void check(CuResult r, const char* call, const std::string& what) const;
};

// The process's driver: opened and initialised by the first call (from `path`, core's
// STRATA_CUDA_DRIVER, when not empty, else libcuda.so.1), or null with why_no_driver()
// saying what was missing or failed. Later calls return the first outcome whatever path
// they pass.
const CudaDriver* cuda_driver(const std::string& path = "");
const std::string& why_no_driver();
// The driver, where this process already loaded it (CUDA's runtime does when a program
// first touches a GPU), else null without loading it: a process that never loaded the
// driver holds no device memory, so its calls need not pay for opening it. `path` as
// for cuda_driver.
const CudaDriver* driver_in_use(const std::string& path = "");

}  // namespace strata::device
