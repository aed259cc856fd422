// Handing a whole message to the receive that matched it, for the transports that copy
// (the TCP transport and the WAN link): into its buffer, or, when the message is larger
// than that buffer, failing the receive with the same words on every transport; and
// sending to yourself, which both do the same way.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include "transport/buffer_pool.hpp"
#include "transport/transport.hpp"

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

// A message to this rank itself: into a receive already posted for `tag` (taken from
// `posted`), else copied and held in `unexpected` as the record hold(copy, bytes) makes.
// The send is complete either way.
template <class Posted, class Held, class Hold>
void deliver_to_self(int rank, Tag tag, const void* buf, std::size_t bytes, Posted& posted, Held& unexpected,
                     BufferPool& pool, Hold&& hold) {
  if (auto r = posted.take(tag)) return deliver_whole(rank, buf, bytes, *r);
  BufferPool::Buffer copy = pool.take(bytes);
  if (bytes) std::memcpy(copy.data.get(), buf, bytes);
  unexpected.push(tag, hold(std::move(copy), bytes));
}

}  // namespace strata::transport
