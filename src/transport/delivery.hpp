// Handing a whole message to the receive that matched it, for the transports that copy
// (the TCP transport and the WAN link): into its buffer, or, when the message is larger
// than that buffer, failing the receive with the same words on every transport.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

namespace strata::transport {

inline std::string truncation(int peer, std::size_t got, std::size_t cap) {
  return "message from rank " + std::to_string(peer) + " truncated: " + std::to_string(got) +
         " bytes into a " + std::to_string(cap) + "-byte receive buffer";
}

// Req: a request with buf, size, fail(why) and complete(bytes).
template <class Req>
void deliver_whole(int peer, const void* msg, std::size_t bytes, Req& r) {
  if (bytes > r.size) return r.fail(truncation(peer, bytes, r.size));
  if (bytes) std::memcpy(r.buf, msg, bytes);
  r.complete(bytes);
}

}  // namespace strata::transport
