// The TCP transport's record of a message that arrived before its receive.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transport/buffer_pool.hpp"
#include "transport/copy_request.hpp"
#include "transport/delivery.hpp"
#include "transport/transport.hpp"

namespace strata::transport::tcp {

// A message that arrived before its receive was posted. A receive posted while the
// payload is still streaming in attaches itself as `waiting`.
struct Unexpected {
  BufferPool::Buffer buffer;
  std::size_t size = 0;
  bool complete = false;
  bool budgeted = false;  // counted against the unexpected budget (from a peer, not self)
  std::shared_ptr<CopyRequest> waiting;
};

// Copies a fully received unexpected message into the receive that matched it.
inline void deliver(int peer, Unexpected& u, CopyRequest& r, BufferPool& pool) {
  deliver_whole(peer, u.buffer.data.get(), u.size, r);
  pool.give(std::move(u.buffer));
}

}  // namespace strata::transport::tcp
