#include "comm.hpp"

#include "errors.hpp"
#include "log.hpp"
#include "recv_comm.hpp"
#include "send_comm.hpp"

namespace strata::nccl_net {

RequestPool::RequestPool(std::size_t capacity) : storage_(new Request[capacity]) {
  free_.reserve(capacity);
  for (std::size_t i = capacity; i-- > 0;) free_.push_back(&storage_[i]);
}

Request* RequestPool::get(TransferComm* owner) {
  if (free_.empty()) return nullptr;
  Request* r = free_.back();
  free_.pop_back();
  *r = Request{};
  r->magic = Request::kLive;
  r->owner = owner;
  return r;
}

void RequestPool::put(Request* r) {
  r->magic = 0;
  free_.push_back(r);
}

void TransferComm::poll() noexcept {
  if (failed_) return;
  try {
    if (kind() == Kind::send)
      static_cast<SendComm*>(this)->progress();
    else
      static_cast<RecvComm*>(this)->progress();
  } catch (const NetError& e) {
    fail(e.code(), e.what());
  } catch (const std::exception& e) {
    // src/wan's frame decoding throws strata::TransportError for a garbled frame.
    fail(abi::remote_error, e.what());
  } catch (...) {
    fail(abi::internal_error, "unknown exception");
  }
}

void TransferComm::check() const {
  if (failed_) throw NetError(fail_code_, "connection with " + peer_ + " failed: " + fail_reason_);
}

void TransferComm::fail(abi::Result code, const std::string& why) {
  if (failed_) return;
  failed_ = true;
  fail_code_ = code;
  fail_reason_ = why;
  log::warn("connection with %s failed: %s", peer_.c_str(), why.c_str());
}

}  // namespace strata::nccl_net
