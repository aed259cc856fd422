// The request of the transports that copy bytes through sockets (TCP, the WAN link): a
// buffer, its tag, and an outcome set once. UCX has its own (ucx/ucx_request.hpp).
#pragma once

#include <cstddef>
#include <string>

#include "transport/transport.hpp"

namespace strata::transport {

class CopyRequest : public Request {
 public:
  CopyRequest(int peer, Tag tag, void* buf, std::size_t size) : Request(peer), tag(tag), buf(buf), size(size) {}
  bool done() const override { return done_; }
  const std::string& error() const override { return error_; }
  std::size_t bytes() const override { return bytes_; }
  // The first outcome stands: a request that completed does not fail later, nor the reverse.
  void complete(std::size_t n) {
    if (done_) return;
    bytes_ = n;
    done_ = true;
  }
  void fail(const std::string& why) {
    if (done_) return;
    error_ = why;
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

}  // namespace strata::transport
