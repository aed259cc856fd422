#include "device/memory.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

namespace strata::device {

const char* to_string(MemoryKind k) { return k == MemoryKind::device ? "device" : "host"; }

namespace {

struct Emulated {
  std::mutex mu;
  std::map<std::uintptr_t, std::uintptr_t> ranges;  // begin -> end
};
Emulated& emulated() {
  static Emulated e;
  return e;
}
std::atomic<bool> any_emulated{false};

bool is_emulated(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  Emulated& e = emulated();
  std::lock_guard lk(e.mu);
  auto it = e.ranges.upper_bound(a);
  return it != e.ranges.begin() && a < std::prev(it)->second;
}

}  // namespace

void emulate(const void* begin, std::size_t bytes) {
  Emulated& e = emulated();
  std::lock_guard lk(e.mu);
  const auto a = reinterpret_cast<std::uintptr_t>(begin);
  e.ranges[a] = a + std::max<std::size_t>(bytes, 1);
  any_emulated = true;
}

void forget(const void* begin) {
  Emulated& e = emulated();
  std::lock_guard lk(e.mu);
  e.ranges.erase(reinterpret_cast<std::uintptr_t>(begin));
}

Placement placement_of(const void* p, const std::string& driver_path) {
  Placement out;
  if (p && any_emulated.load(std::memory_order_relaxed) && is_emulated(p)) {
    out.kind = MemoryKind::device;
    out.device = kEmulatedDevice;
    return out;
  }
  const CudaDriver* d = p ? driver_in_use(driver_path) : nullptr;
  if (!d) return out;
  const auto ptr = static_cast<CuDevicePtr>(reinterpret_cast<std::uintptr_t>(p));
  unsigned type = 0;
  // Memory CUDA never saw (malloc, the stack) answers CUDA_ERROR_INVALID_VALUE: host.
  if (d->pointer_get_attribute(&type, kPointerAttributeMemoryType, ptr) != kCudaSuccess) return out;
  if (type != kMemoryTypeDevice && type != kMemoryTypeUnified) return out;
  out.kind = MemoryKind::device;
  d->pointer_get_attribute(&out.device, kPointerAttributeDeviceOrdinal, ptr);
  d->pointer_get_attribute(&out.context, kPointerAttributeContext, ptr);
  // Memory from a pool (cudaMallocAsync) belongs to no context: its device's primary
  // context, the one CUDA's runtime uses, serves. (Retained for the process's life.)
  int dev = 0;
  if (!out.context && out.device >= 0 && d->device_get(&dev, out.device) == kCudaSuccess)
    d->device_primary_ctx_retain(&out.context, dev);
  return out;
}

}  // namespace strata::device
