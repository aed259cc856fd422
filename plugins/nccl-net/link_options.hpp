// How one connection frames its data; fixed when it is set up.
//
// Same region ("direct"): one TCP stream, whole messages as single frames, no payload
// CRC and no acknowledgements: the frames only carry the tag and size the receiver
// matches on, and the kernel's TCP checksum is what LAN traffic gets everywhere else.
//
// Different regions ("striped"): src/wan's scheme. K streams, messages cut into stripes
// handed to the least-loaded stream (wan/striping.hpp), every frame with a sequence
// number and a CRC32C (wan/frame.hpp), cumulative acks per stream that bound each
// stream's unacknowledged bytes by `window`, and a send completes once acknowledged.
#pragma once

#include <chrono>
#include <cstddef>

namespace strata::nccl_net {

struct LinkOptions {
  bool striped = false;
  bool checksum = false;  // striped links only
  bool acks = false;      // striped links only
  std::size_t frame_bytes = std::size_t{1} << 30;  // largest payload per frame
  std::size_t window = 64u << 20;                  // unacknowledged bytes per stream
  std::chrono::nanoseconds delay{0};               // emulated one-way delay (STRATA_WAN_EMULATE)
};

}  // namespace strata::nccl_net
