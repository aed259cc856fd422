#include "device/cuda_driver.hpp"

#include <dlfcn.h>
#include <link.h>

#include <atomic>

#include "device/shared_library.hpp"
#include "strata/errors.hpp"

namespace strata::device {

namespace {

Opened<CudaDriver> load(const std::string& path) {
  Opened<CudaDriver> l;
  SharedLibrary lib(path.empty() ? std::vector<std::string>{"libcuda.so.1", "libcuda.so"}
                                 : std::vector<std::string>{path});
  if (!lib.open()) {
    l.why = "CUDA's driver library could not be opened (" + lib.why() + ")";
    return l;
  }
  CudaDriver& d = l.api;
  // The _v2 names are the current ABI of those calls (cuda.h maps the plain names to
  // them); the default-stream flavour, not the per-thread one.
  const bool all = lib.take(d.init, "cuInit") && lib.take(d.get_error_string, "cuGetErrorString") &&
                   lib.take(d.pointer_get_attribute, "cuPointerGetAttribute") &&
                   lib.take(d.ctx_get_current, "cuCtxGetCurrent") && lib.take(d.ctx_set_current, "cuCtxSetCurrent") &&
                   lib.take(d.device_get, "cuDeviceGet") &&
                   lib.take(d.device_primary_ctx_retain, "cuDevicePrimaryCtxRetain") &&
                   lib.take(d.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2") &&
                   lib.take(d.memcpy_htod_async, "cuMemcpyHtoDAsync_v2") &&
                   lib.take(d.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2") &&
                   lib.take(d.event_create, "cuEventCreate") && lib.take(d.event_record, "cuEventRecord") &&
                   lib.take(d.event_query, "cuEventQuery") && lib.take(d.event_synchronize, "cuEventSynchronize") &&
                   lib.take(d.event_destroy, "cuEventDestroy_v2") &&
                   lib.take(d.stream_wait_event, "cuStreamWaitEvent") &&
                   lib.take(d.mem_alloc, "cuMemAlloc_v2") && lib.take(d.mem_free, "cuMemFree_v2") &&
                   lib.take(d.mem_host_alloc, "cuMemHostAlloc") && lib.take(d.mem_free_host, "cuMemFreeHost") &&
                   lib.take(d.mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2") &&
                   lib.take(d.stream_create, "cuStreamCreate") && lib.take(d.stream_destroy, "cuStreamDestroy_v2") &&
                   lib.take(d.stream_wait_value32, "cuStreamWaitValue32_v2") &&
                   lib.take(d.stream_write_value32, "cuStreamWriteValue32_v2");
  if (!all) {
    l.why = "CUDA's driver library " + lib.name() + " lacks an entry point strata needs (" + lib.why() + ")";
    return l;
  }
  if (const CuResult r = d.init(0); r != kCudaSuccess) {
    l.why = d.describe(r, "cuInit") + " with " + lib.name() + ": no usable CUDA device or driver here";
    return l;
  }
  l.ok = true;
  return l;
}

OpenOnce<CudaDriver> opened;

}  // namespace

std::string CudaDriver::describe(CuResult r, const char* call) const {
  const char* s = nullptr;
  if (get_error_string == nullptr || get_error_string(r, &s) != kCudaSuccess || s == nullptr) s = "unknown error";
  return std::string(call) + " failed: CUDA error " + std::to_string(r) + " (" + s + ")";
}

void CudaDriver::check(CuResult r, const char* call, const std::string& what) const {
  if (r != kCudaSuccess) throw TransportError(what + ": " + describe(r, call));
}

const CudaDriver* cuda_driver(const std::string& path) {
  const auto& o = opened.get([&] { return load(path); });
  return o.ok ? &o.api : nullptr;
}

namespace {

// How many objects the process has loaded so far (glibc counts every load), read at the
// cost of one call into the loader.
unsigned long long loads_so_far() {
  unsigned long long adds = 0;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;
      },
      &adds);
  return adds;
}

// Asking the loader by name (RTLD_NOLOAD) costs ~20 us of file system calls, too much
// for every collective: it is asked again only after something new was loaded.
std::atomic<unsigned long long> loads_when_absent{~0ull};

}  // namespace

const CudaDriver* driver_in_use(const std::string& path) {
  if (!opened.done()) {
    const unsigned long long loads = loads_so_far();
    if (loads == loads_when_absent.load(std::memory_order_relaxed)) return nullptr;
    void* h = ::dlopen(path.empty() ? "libcuda.so.1" : path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
      loads_when_absent.store(loads, std::memory_order_relaxed);
      return nullptr;
    }
    ::dlclose(h);  // the reference RTLD_NOLOAD took
  }
  return cuda_driver(path);
}

const std::string& why_no_driver() {
  return opened.get([] { return load(""); }).why;
}

}  // namespace strata::device
