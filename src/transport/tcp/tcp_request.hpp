// Request and unexpected-message records of the TCP transport.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transport/delivery.hpp"
#include "transport/transport.hpp"

namespace strata::transport::tcp {

class TcpRequest : public Request {
 public:
  TcpRequest(int peer, Tag tag, void* buf, std::size_t size)
      : Request(peer), tag(tag), buf(buf), size(size) {}
  bool done() const override { return done_; }
  const std::string& error() const override { return error_; }
  std::size_t bytes() const override { return bytes_; }
  void complete(std::size_t n) {
    bytes_ = n;
    done_ = true;
  }
  void fail(std::string why) {
    error_ = std::move(why);
    done_ = true;
  }

  const Tag tag;
  void* const buf;
  const std::size_t size;  // payload bytes (send) or capacity (receive)

 private:
  bool done_ = false;
  std::string error_;
  std::size_t bytes_ = 0;
};

// Staging memory for messages that arrive before their receive. Recycled, because a
// fresh large allocation costs page faults worth several copies of its bytes.
class BufferPool {
 public:
  struct Buffer {
    std::unique_ptr<char[]> data;
    std::size_t capacity = 0;
  };
  Buffer take(std::size_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->capacity >= bytes) {
        Buffer b = std::move(*it);
        free_.erase(it);
        held_ -= b.capacity;
        return b;
      }
    return Buffer{std::unique_ptr<char[]>(new char[bytes ? bytes : 1]), bytes};
  }
  void give(Buffer b) {
    if (!b.data || held_ + b.capacity > kMaxHeld) return;
    held_ += b.capacity;
    free_.push_back(std::move(b));
  }

 private:
  static constexpr std::size_t kMaxHeld = 256u << 20;
  std::vector<Buffer> free_;
  std::size_t held_ = 0;
};

// A message that arrived before its receive was posted. A receive posted while the
// payload is still streaming in attaches itself as `waiting`.
struct Unexpected {
  BufferPool::Buffer buffer;
  std::size_t size = 0;
  bool complete = false;
  bool budgeted = false;  // counted against the unexpected budget (from a peer, not self)
  std::shared_ptr<TcpRequest> waiting;
};

// Copies a fully received unexpected message into the receive that matched it.
inline void deliver(int peer, Unexpected& u, TcpRequest& r, BufferPool& pool) {
  deliver_whole(peer, u.buffer.data.get(), u.size, r);
  pool.give(std::move(u.buffer));
}

}  // namespace strata::transport::tcp
