// Sends, receives and their completion: how a seam request maps onto ucp tag operations.
#include <string>

#include "strata/errors.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace strata::transport {

namespace {

// The sender's rank rides above the seam's tag bits, so a full-mask receive matches
// exactly one (source, tag) pair, as the seam promises.
constexpr ucp_tag_t kFullMask = ~ucp_tag_t{0};

ucp_tag_t wire_tag(int source, Tag tag) {
  return (static_cast<ucp_tag_t>(source) << kTagBits) | (tag & ((Tag{1} << kTagBits) - 1));
}

// UCX may dereference the buffer pointer even for zero bytes; give it something valid.
char zero_byte_buffer;

}  // namespace

std::shared_ptr<UcxRequest> UcxTransport::start(UcxRequest::Kind kind, int peer,
                                                std::size_t size) {
  if (peer < 0 || peer >= size_)
    throw InvalidArgument("ucx: peer " + std::to_string(peer) + " outside a world of " +
                          std::to_string(size_));
  auto req = std::make_shared<UcxRequest>(this, kind, peer, size);
  if (aborted()) req->fail(abort_text());
  return req;
}

RequestPtr UcxTransport::isend(int peer, Tag tag, const void* buf, std::size_t bytes) {
  auto req = start(UcxRequest::Kind::send, peer, bytes);
  if (req->done()) return req;
  if (!peer_failure_[peer].empty()) {
    req->fail("ucx: send to rank " + std::to_string(peer) + " impossible: " +
              peer_failure_[peer]);
    return req;
  }
  ucp_ep_h ep = nullptr;
  try {
    ep = endpoint(peer);
  } catch (const TransportError& e) {
    req->fail(e.what());
    return req;
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxTransport::on_send;
  param.user_data = req.get();
  pending_.emplace(req.get(), req);
  const ucs_status_ptr_t ret = ucp_tag_send_nbx(ep, bytes ? buf : &zero_byte_buffer, bytes,
                                                wire_tag(rank_, tag), &param);
  launched(req, ret, bytes);
  return req;
}

RequestPtr UcxTransport::irecv(int peer, Tag tag, void* buf, std::size_t capacity) {
  auto req = start(UcxRequest::Kind::recv, peer, capacity);
  if (req->done()) return req;
  ucp_request_param_t param{};
  // UCX 1.13 leaves recv_info unfilled when a receive completes immediately, and the
  // seam must report the received length; so every receive completes via the callback.
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = &UcxTransport::on_recv;
  param.user_data = req.get();
  pending_.emplace(req.get(), req);
  const ucs_status_ptr_t ret = ucp_tag_recv_nbx(worker_, capacity ? buf : &zero_byte_buffer,
                                                capacity, wire_tag(peer, tag), kFullMask, &param);
  launched(req, ret, 0);
  // A message the failed peer sent before dying may still be delivered (above); anything
  // else would wait forever.
  if (!req->done() && !peer_failure_[peer].empty()) {
    req->fail(peer_failure_[peer]);
    if (req->ucx_) ucp_request_cancel(worker_, req->ucx_);
  }
  return req;
}

bool UcxTransport::probe(int peer, Tag tag) {
  ucp_tag_recv_info_t info{};
  return ucp_tag_probe_nb(worker_, wire_tag(peer, tag), kFullMask, 0, &info) != nullptr;
}

void UcxTransport::launched(const std::shared_ptr<UcxRequest>& req, ucs_status_ptr_t ret,
                            std::size_t immediate_bytes) {
  if (UCS_PTR_IS_PTR(ret)) {
    // UCX sometimes runs the callback before returning (a truncated rendezvous receive
    // does); then the handle is already freed and must not be kept.
    if (!req->done_) req->ucx_ = ret;
    return;
  }
  // Finished (or refused) on the spot: no callback will come.
  complete(req.get(), UCS_PTR_STATUS(ret), immediate_bytes);
}

void UcxTransport::on_send(void* ucx_req, ucs_status_t status, void* user) {
  auto* req = static_cast<UcxRequest*>(user);
  req->ucx_ = nullptr;
  ucp_request_free(ucx_req);
  req->owner_->complete(req, status, req->size_);
}

void UcxTransport::on_recv(void* ucx_req, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user) {
  auto* req = static_cast<UcxRequest*>(user);
  req->ucx_ = nullptr;
  ucp_request_free(ucx_req);
  req->owner_->complete(req, status, info ? info->length : 0);
}

void UcxTransport::complete(UcxRequest* req, ucs_status_t status, std::size_t length) {
  if (status == UCS_OK) {
    // A request already failed by abort stays failed, even if UCX finished it meanwhile.
    if (!req->done_) req->succeed(length);
  } else {
    req->fail(failure_text(*req, status, length));
  }
  // May destroy the request when the caller no longer holds it: touch nothing after.
  pending_.erase(req);
}

std::string UcxTransport::failure_text(const UcxRequest& req, ucs_status_t status,
                                       std::size_t length) const {
  const std::string peer = std::to_string(req.peer());
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    const std::string cap = std::to_string(req.size_);
    if (length > req.size_)
      return "message from rank " + peer + " truncated: " + std::to_string(length) +
             " bytes into a " + cap + "-byte buffer";
    return "message from rank " + peer + " truncated: larger than the " + cap +
           "-byte buffer";
  }
  std::string text = req.kind_ == UcxRequest::Kind::send ? "ucx: send to rank " + peer
                                                         : "ucx: receive from rank " + peer;
  text += std::string(" failed: ") + ucs_status_string(status);
  if (!peer_failure_[req.peer()].empty()) text += " (" + peer_failure_[req.peer()] + ")";
  return text;
}

void UcxTransport::fail_pending(const std::string& why, int only_peer) {
  // Cancelling runs completion callbacks that erase from pending_, so work on a copy.
  std::vector<std::shared_ptr<UcxRequest>> victims;
  for (const auto& [raw, req] : pending_)
    if (only_peer < 0 || req->peer() == only_peer) victims.push_back(req);
  for (const auto& req : victims) {
    req->fail(why);
    // Only receives can be cancelled; sends end when their endpoint is force-closed.
    if (req->kind_ == UcxRequest::Kind::recv && req->ucx_)
      ucp_request_cancel(worker_, req->ucx_);
  }
}

}  // namespace strata::transport
