// Request and unexpected-message records of the TCP transport.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

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

// A message that arrived before its receive was posted. A receive posted while the
// payload is still streaming in attaches itself as `waiting`.
struct Unexpected {
  std::vector<char> data;
  bool complete = false;
  std::shared_ptr<TcpRequest> waiting;
};

inline std::string truncation(int peer, std::size_t got, std::size_t cap) {
  return "message from rank " + std::to_string(peer) + " truncated: " + std::to_string(got) +
         " bytes into a " + std::to_string(cap) + "-byte receive buffer";
}

// Copies a fully received unexpected message into the receive that matched it.
inline void deliver(int peer, Unexpected& u, TcpRequest& r) {
  if (u.data.size() > r.size) return r.fail(truncation(peer, u.data.size(), r.size));
  if (!u.data.empty()) std::memcpy(r.buf, u.data.data(), u.data.size());
  r.complete(u.data.size());
}

}  // namespace strata::transport::tcp
