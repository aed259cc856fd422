// Where a buffer lives: host memory (pageable or pinned) or a CUDA device's. Found per
// buffer from the driver's pointer attributes, as NCCL's users hand device pointers
// without saying so; where no driver could be opened every buffer is host memory, since
// no device memory can exist in the process.
#pragma once

#include <cstddef>
#include <string>

#include "device/cuda_driver.hpp"

namespace strata::device {

enum class MemoryKind { host, device };
const char* to_string(MemoryKind k);

struct Placement {
  MemoryKind kind = MemoryKind::host;
  int device = -1;              // the CUDA device ordinal, for device memory
  CuContext context = nullptr;  // the context the memory belongs to
};

// Managed (unified) memory counts as device memory: NCCL and the copy engines take it,
// and the GPU path keeps it off the host's reduction loops. `driver_path` as for
// cuda_driver; a process that has not loaded CUDA's driver pays nothing here.
Placement placement_of(const void* p, const std::string& driver_path = "");

// Emulated device memory, for the tests of the GPU path on machines without one: host
// memory in [begin, begin + bytes) is placed on device kEmulatedDevice until forgotten.
// Calls on such buffers take the GPU path with host_copy_streams() (copy_stream.hpp).
inline constexpr int kEmulatedDevice = -2;
void emulate(const void* begin, std::size_t bytes);
void forget(const void* begin);

}  // namespace strata::device
