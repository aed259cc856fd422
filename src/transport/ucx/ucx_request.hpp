// The Request handed out by UcxTransport. Its state is only written on the engine thread
// (by the UCX completion callbacks, which run inside ucp_worker_progress, or by the
// transport when it fails requests), so plain fields suffice.
#pragma once

#include <cstddef>
#include <string>

#include "transport/transport.hpp"

namespace strata::transport {

class UcxTransport;

class UcxRequest final : public Request {
 public:
  enum class Kind { send, recv };

  UcxRequest(UcxTransport* owner, Kind kind, int peer, std::size_t size)
      : Request(peer), owner_(owner), kind_(kind), size_(size) {}

  bool done() const override { return done_; }
  const std::string& error() const override { return error_; }
  std::size_t bytes() const override { return bytes_; }

 private:
  friend class UcxTransport;

  void succeed(std::size_t bytes) {
    bytes_ = bytes;
    done_ = true;
  }
  // The first failure wins: a request failed by abort() later completes inside UCX with
  // UCS_ERR_CANCELED, which must not replace the reason the caller should see.
  void fail(std::string why) {
    if (done_) return;
    error_ = std::move(why);
    done_ = true;
  }

  UcxTransport* owner_;
  Kind kind_;
  std::size_t size_;      // bytes to send, or the receive capacity
  void* ucx_ = nullptr;   // UCX's request while it is in flight inside UCX
  bool done_ = false;
  std::size_t bytes_ = 0;
  std::string error_;
};

}  // namespace strata::transport
