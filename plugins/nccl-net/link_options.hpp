// How one connection frames its data; fixed when it is set up.
//
// Same region ("direct"): one TCP stream, whole messages as single frames, no payload
// CRC and no acknowledgements: the frames only carry the tag and size the receiver
// matches on, and the kernel's TCP checksum is what LAN traffic gets everywhere else.
//
// Different regions ("striped"): src/wan's scheme. K streams, messages cut into stripes
// handed to the least-loaded stream (link/striping.hpp), every frame with a sequence
// number and a CRC32C (link/frame.hpp), cumulative acks per stream that bound each
// stream's unacknowledged bytes by `window`, and a send completes once acknowledged. A
// stream that breaks is redialled and its unacknowledged frames resent (stream_rejoin.hpp).
// With STRATA_WAN_TLS=1 every striped stream, and every redial of one, runs in TLS
// (wire.hpp), and frames carry no payload CRC: each TLS record's tag authenticates it.
#pragma once

#include "base/listener.hpp"
#include "base/tcp_path.hpp"
#include <chrono>
#include <cstddef>
#include <cstdint>

struct ssl_ctx_st;

namespace strata::nccl_net {

struct LinkOptions {
  bool striped = false;
  bool checksum = false;  // striped links only
  bool acks = false;      // striped links only
  std::size_t frame_bytes = std::size_t{1} << 30;  // largest payload per frame
  std::size_t window = 64u << 20;                  // unacknowledged bytes per stream
  std::chrono::nanoseconds delay{0};               // emulated one-way delay (STRATA_WAN_EMULATE)
  bool rejoin = false;  // striped: broken streams are redialled (both ends agreed)
  std::chrono::milliseconds reconnect_for{60000};  // a stream down this long fails the comm
  net::PathTuning tuning;                          // striped: redialled streams' TCP set-up
  ssl_ctx_st* tls = nullptr;     // striped: the streams' TLS context (null: clear text)
  std::uint64_t cut_after = 0;  // emulated: stream 0 is cut once after this many frames
  net::PortRange ports;         // where the rejoin listener takes its port (STRATA_PORT_RANGE)
};

}  // namespace strata::nccl_net
