// Copies between a call's device buffers and host memory, in order on one stream, and
// markers that tell the engine thread (which never blocks on the GPU) when the copies
// enqueued before them are done. Two kinds: CUDA's (the driver's async copies and
// events, on a stream of the caller's), and an emulation on host memory whose copies run
// in order on a thread of their own, so that the code that schedules copies and waits
// for them runs in CI exactly as it does on a GPU.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "device/cuda_driver.hpp"
#include "device/memory.hpp"

namespace strata::device {

class Marker {
 public:
  virtual ~Marker() = default;
  // True once everything enqueued on the stream before the marker is done; throws
  // TransportError naming the stream's failure.
  virtual bool done() = 0;
};

// One call's copies. Made by the communicator's CopyStreams when the call is issued; its
// methods then run on the engine thread, except hold_caller (at issue, on the caller's).
class CopyStream {
 public:
  virtual ~CopyStream() = default;
  virtual void to_host(void* host, const void* dev, std::size_t bytes) = 0;
  virtual void to_device(void* dev, const void* host, std::size_t bytes) = 0;
  virtual void within_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual std::shared_ptr<Marker> mark() = 0;
  // The stream the copies go on, for device work that must be ordered with them (NCCL's
  // collectives), with the buffers' context current; null in the emulation.
  virtual CuStream device_stream() = 0;
  // Page-locked host memory (the only kind the copy engines read and write while the
  // host goes on) in `slot` (below kStagingSlots), kept by the communicator for later
  // calls: valid until the next staging() of the same slot, which finds the copies of
  // earlier calls done since a call ends only when its last copy did.
  static constexpr int kStagingSlots = 8;
  virtual void* staging(int slot, std::size_t bytes) = 0;
  // Device memory for a plan's intermediate results (a reordering of blocks), kept by the
  // communicator like staging; valid until the next call's.
  virtual void* device_scratch(std::size_t bytes) = 0;
  // The caller's stream waits, on the device, until release_caller(): work the caller
  // enqueues after the collective sees its results, and the call's first copy waits for
  // work enqueued before it. hold_caller runs when the call is issued; release_caller
  // after its last copy was enqueued (the device then releases the stream once that copy
  // is done), or at once when it failed, so that the stream never hangs.
  virtual void hold_caller() = 0;
  virtual void release_caller(bool failed) = 0;
};

// Bytes a communicator's calls copied between device and host memory (page-locked
// staging), for its TrafficStats; any thread may read them.
struct CopyCounters {
  std::atomic<std::uint64_t> to_host{0}, to_device{0};
};

// A communicator's: the per-device state its calls share (the copy stream, the flag the
// callers' streams wait on, staging memory), and the CopyStream of each call.
class CopyStreams {
 public:
  virtual ~CopyStreams() = default;
  // For a call whose buffers are at `where`, ordered after the caller's `stream`.
  virtual std::unique_ptr<CopyStream> open(const Placement& where, CuStream stream) = 0;
};

// `counters` must outlive the result.
std::unique_ptr<CopyStreams> cuda_copy_streams(const CudaDriver& d, CopyCounters& counters);
// The emulation: "device" memory is host memory (device::emulate, memory.hpp), copies
// run in order on a thread of their own.
std::unique_ptr<CopyStreams> host_copy_streams(CopyCounters& counters);

}  // namespace strata::device
