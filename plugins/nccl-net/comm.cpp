#include "comm.hpp"

#include "errors.hpp"
#include "log.hpp"
#include "recv_comm.hpp"
#include "send_comm.hpp"
#include "ucx_path.hpp"

namespace strata::nccl_net {

RequestPool::RequestPool(std::size_t capacity) : storage_(new Request[capacity]), capacity_(capacity) {
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
    const bool send = kind() == Kind::send;
    if (path_ == Path::ucx) {
      if (send)
        static_cast<UcxSendComm*>(this)->progress();
      else
        static_cast<UcxRecvComm*>(this)->progress();
    } else {
      if (send)
        static_cast<SendComm*>(this)->progress();
      else
        static_cast<RecvComm*>(this)->progress();
    }
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

Request* post_send(TransferComm& c, const void* data, std::size_t size, int tag) {
  if (size > kMaxMessageBytes)
    misuse("isend of " + std::to_string(size) + " bytes exceeds maxP2pBytes " +
           std::to_string(kMaxMessageBytes));
  if (!data && size) misuse("isend with a null buffer");
  if (c.path() == TransferComm::Path::ucx) return static_cast<UcxSendComm&>(c).isend(data, size, tag);
  return static_cast<SendComm&>(c).isend(data, size, tag);
}

Request* post_recv(TransferComm& c, int n, void* const* data, const std::size_t* sizes, const int* tags) {
  if (n < 1 || n > kMaxRecvs)
    misuse("irecv of " + std::to_string(n) + " buffers; maxRecvs is " + std::to_string(kMaxRecvs));
  if (!data || !sizes || !tags) misuse("irecv with a null data, sizes or tags array");
  for (int i = 0; i < n; ++i) {
    if (!data[i] && sizes[i]) misuse("irecv with a null buffer of " + std::to_string(sizes[i]) + " bytes");
    for (int j = 0; j < i; ++j)
      if (tags[j] == tags[i]) misuse("grouped irecv with tag " + std::to_string(tags[i]) + " twice");
  }
  if (c.path() == TransferComm::Path::ucx) return static_cast<UcxRecvComm&>(c).irecv(n, data, sizes, tags);
  return static_cast<RecvComm&>(c).irecv(n, data, sizes, tags);
}

void destroy(TransferComm* c) noexcept {
  if (!c) return;
  const bool send = c->kind() == Comm::Kind::send;
  if (c->path() == TransferComm::Path::ucx) {
    if (send)
      delete static_cast<UcxSendComm*>(c);
    else
      delete static_cast<UcxRecvComm*>(c);
  } else {
    if (send)
      delete static_cast<SendComm*>(c);
    else
      delete static_cast<RecvComm*>(c);
  }
}

}  // namespace strata::nccl_net
