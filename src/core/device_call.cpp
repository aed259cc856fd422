#include "core/device_call.hpp"

#include <algorithm>
#include <cstdint>

namespace strata::detail {

namespace {

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

DeviceCall::DeviceCall(device::CopyStreams& streams, const collectives::CollArgs& a, const CallBuffers& b)
    : copies_(streams.open(b.where, b.stream)),
      args_(a),
      buffers_(b) {
  copies_->hold_caller();
}

collectives::CollArgs DeviceCall::stage_in(const Wait& wait) {
  const auto s = addr(args_.send), r = addr(args_.recv);
  const std::size_t sb = buffers_.send_bytes, rb = buffers_.recv_bytes;
  const bool overlap = sb && rb && s < r + rb && r < s + sb;
  if (overlap) {
    // In place (the only overlap the checks let through): one block spanning both.
    const auto lo = std::min(s, r), hi = std::max(s + sb, r + rb);
    char* block = static_cast<char*>(copies_->staging(0, hi - lo));
    host_send_ = block + (s - lo);
    host_recv_ = block + (r - lo);
  } else {
    if (sb) host_send_ = static_cast<char*>(copies_->staging(0, sb));
    if (rb) host_recv_ = static_cast<char*>(copies_->staging(1, rb));
  }
  if (sb) {
    copies_->to_host(host_send_, args_.send, sb);
    wait(*copies_->mark());
  }
  // Where a pointer of the call lies in the staging. A broadcast's non-root passes its
  // recv as send; a pointer into no extent (null, or a buffer of zero bytes) is never read.
  auto staged = [&](const void* p) -> void* {
    const auto a = addr(p);
    if (p && sb && a >= s && a < s + sb) return host_send_ + (a - s);
    if (p && rb && a >= r && a < r + rb) return host_recv_ + (a - r);
    return nullptr;
  };
  collectives::CollArgs h = args_;
  h.send = staged(args_.send);
  h.recv = staged(args_.recv);
  return h;
}

void DeviceCall::finish(const Wait& wait) {
  if (host_recv_) copies_->to_device(args_.recv, host_recv_, buffers_.recv_bytes);
  // The mark after the release: once the call is done, so is the write that releases the
  // caller's stream, which a failed later call's write from the host must not precede.
  copies_->release_caller(false);
  wait(*copies_->mark());
}

}  // namespace strata::detail
