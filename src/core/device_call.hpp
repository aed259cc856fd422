// A collective on device buffers, on the communicator's copy stream, ordered after the
// caller's stream, which in turn waits (on the device) for the call to end. Two ways:
// where the hierarchical plan runs the call on the device (hierarchy::plan_runs_on_device:
// split rail's allreduce), its levels inside a region run on NCCL and only each
// segment's shard is staged through host memory across regions (hierarchy/
// device_engines.hpp); any other call is staged whole: its input copied into page-locked
// host memory, the host plan run there exactly as for host buffers, its output copied
// back.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

#include "collectives/dispatch.hpp"
#include "device/copy_stream.hpp"
#include "device/memory.hpp"

namespace strata::detail {

// Where one call's buffers are, as the argument checks found them: their extents (the
// bytes from send that the call reads, from recv that it writes; 0 where it reads or
// writes none, as a broadcast's non-root its send) and their placement.
struct CallBuffers {
  device::Placement where;
  std::size_t send_bytes = 0, recv_bytes = 0;
  void* stream = nullptr;  // CallOptions::stream
};

class DeviceCall {
 public:
  // At issue, on the caller's thread: holds the caller's stream (CopyStream::hold_caller).
  DeviceCall(device::CopyStreams& streams, const collectives::CollArgs& a, const CallBuffers& b);
  // Engine thread. `wait` blocks until the marker is done or the call's deadline passed
  // (it progresses the transport meanwhile and throws what the call fails with).
  using Wait = std::function<void(device::Marker&)>;
  // Staged whole: the same call on staging memory; send is copied in.
  collectives::CollArgs stage_in(const Wait& wait);
  // The call's copies, for the device plan's engines.
  device::CopyStream& copies() { return *copies_; }
  // Copies recv back where the call was staged whole, and releases the caller's stream;
  // returns when the last copy is done.
  void finish(const Wait& wait);

 private:
  std::unique_ptr<device::CopyStream> copies_;
  collectives::CollArgs args_;
  CallBuffers buffers_;
  // Staging of send and recv: one block where they overlap (in place), two otherwise.
  char* host_send_ = nullptr;
  char* host_recv_ = nullptr;
};

}  // namespace strata::detail
