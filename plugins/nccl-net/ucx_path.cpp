#include "ucx_path.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <chrono>

#include "errors.hpp"
#include "log.hpp"
#include "send_comm.hpp"  // steady_ns

namespace strata::nccl_net {

namespace {

using namespace std::chrono_literals;

// After the peer's end of the bootstrap socket closes, what it sent before closing may
// still be on its way (UCX over TCP, or the last fragments of a pipeline): operations
// get this long to finish before they fail.
constexpr std::chrono::nanoseconds kPeerGoneGrace = 1s;
// An idle comm looks at its bootstrap socket at most this often: a poll() per test()
// would cost a system call on every pass of NCCL's progress loop.
constexpr std::chrono::nanoseconds kPeekInterval = 1ms;
// Closing never blocks NCCL for longer than this, whatever state the peer is in.
constexpr std::chrono::milliseconds kCloseTimeout = 2s, kCloseTimeoutPeerGone = 100ms;

constexpr std::int64_t ns(std::chrono::nanoseconds d) { return d.count(); }

// Zero-byte messages still need a valid address for UCX.
char g_empty;

void* buffer_or_empty(const void* data) { return data ? const_cast<void*>(data) : &g_empty; }

}  // namespace

UcxComm::UcxComm(Kind kind, std::unique_ptr<UcxWorker> worker, Fd bootstrap, std::uint32_t tag_space,
                 std::string peer)
    : TransferComm(kind, Path::ucx, std::move(peer)),
      bootstrap_(std::move(bootstrap)),
      worker_(std::move(worker)),
      tag_space_(tag_space) {}

UcxComm::~UcxComm() = default;

void UcxComm::progress() {
  if (worker_->progress()) return;
  const std::int64_t now = steady_ns();
  if (!peer_gone_ && now >= next_peek_ns_) {
    next_peek_ns_ = now + ns(kPeekInterval);
    peek_bootstrap();
  }
  if (peer_gone_ && in_flight_ > 0 && now - gone_at_ns_ > ns(kPeerGoneGrace))
    throw NetError(abi::remote_error, "peer closed the connection with " + std::to_string(in_flight_) +
                                          " operation(s) in flight");
}

void UcxComm::peek_bootstrap() {
  // Nothing is sent on the socket after the handshake, so readable means closed or reset
  // (or a peer breaking the protocol, which ends the connection all the same).
  if (peer_gone_ || !ready(bootstrap_.get(), POLLIN)) return;
  peer_gone_ = true;
  gone_at_ns_ = steady_ns();
}

void UcxComm::drain(void* close_request) noexcept {
  ucp_worker_h w = worker();
  pool_.for_each_live([&](Request& r) {
    for (int i = 0; i < r.n; ++i)
      if (r.slots[i].op) ucp_request_cancel(w, r.slots[i].op);
  });
  const std::int64_t start_ns = steady_ns();
  auto finished = [&] {
    return in_flight_ == 0 && (!close_request || ucp_request_check_status(close_request) != UCS_INPROGRESS);
  };
  while (!finished()) {
    // Once the peer is gone nothing more can complete (a flush it no longer takes part in
    // included), so waiting long then is pointless.
    peek_bootstrap();
    const std::int64_t now_ns = steady_ns();
    const bool gave_up = peer_gone_ ? now_ns - std::max(start_ns, gone_at_ns_) > ns(kCloseTimeoutPeerGone)
                                    : now_ns - start_ns > ns(kCloseTimeout);
    if (gave_up) {
      log::warn("closing the UCX %s connection with %s: %zu operation(s) still in flight%s after %lld ms%s; "
                "abandoning them", kind() == Kind::send ? "send" : "receive", peer().c_str(), in_flight_,
                close_request ? " and the endpoint's flush" : "",
                static_cast<long long>((now_ns - start_ns) / 1'000'000), peer_gone_ ? " (the peer is gone)" : "");
      break;
    }
    if (!worker_->progress()) sched_yield();
  }
  // Released requests never call back, so nothing touches this comm after it is deleted.
  if (close_request) ucp_request_free(close_request);
  pool_.for_each_live([&](Request& r) {
    if (r.op) ucp_request_free(r.op), r.op = nullptr;
    for (int i = 0; i < r.n; ++i)
      if (r.slots[i].op) ucp_request_free(r.slots[i].op), r.slots[i].op = nullptr;
  });
}

// ---- send ----------------------------------------------------------------------------

UcxSendComm::UcxSendComm(std::unique_ptr<UcxWorker> worker, const std::vector<char>& remote_address,
                         Fd bootstrap, std::uint32_t tag_space, std::string peer)
    : UcxComm(Kind::send, std::move(worker), std::move(bootstrap), tag_space, std::move(peer)) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(remote_address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  const ucs_status_t s = ucp_ep_create(this->worker(), &params, &ep_);
  if (s != UCS_OK) ucx_failure("ucp_ep_create to " + this->peer(), s, abi::remote_error);
}

UcxSendComm::~UcxSendComm() {
  // FLUSH lets sends already handed to UCX reach the peer. UCX refuses FORCE without
  // UCP_ERR_HANDLING_MODE_PEER (which would rule out transports), so when the peer is
  // known to be gone the endpoint is left to ucp_worker_destroy, which releases it.
  peek_bootstrap();
  void* close = nullptr;
  if (!peer_gone()) {
    ucp_request_param_t param{};
    close = ucp_ep_close_nbx(ep_, &param);
    if (!UCS_PTR_IS_PTR(close)) close = nullptr;
  }
  drain(close);
}

Request* UcxSendComm::isend(const void* data, std::size_t size, int tag) {
  check();
  if (peer_gone())
    throw NetError(abi::remote_error, "isend to " + peer() + ": the peer has closed the connection");
  Request* r = pool_.get(this);
  if (!r) return nullptr;
  r->size = size;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxSendComm::on_sent;
  param.user_data = r;
  ++in_flight_;  // until on_sent, which may run before ucp_tag_send_nbx returns
  void* op = ucp_tag_send_nbx(ep_, buffer_or_empty(data), size, ucp_tag(tag), &param);
  if (UCS_PTR_IS_PTR(op)) {
    if (!r->op_done) r->op = op;  // else already released by on_sent
  } else {
    --in_flight_;  // finished or refused on the spot: no callback comes
    sent(r, UCS_PTR_STATUS(op));
  }
  check();
  ucp_worker_progress(worker());  // start a rendezvous now: NCCL may not test for a while
  return r;
}

void UcxSendComm::on_sent(void* op, ucs_status_t status, void* user_data) {
  auto* r = static_cast<Request*>(user_data);
  auto* c = static_cast<UcxSendComm*>(r->owner);
  ucp_request_free(op);
  r->op = nullptr;
  r->op_done = true;
  --c->in_flight_;
  c->sent(r, status);
}

void UcxSendComm::sent(Request* r, ucs_status_t status) {
  if (status == UCS_OK)
    r->done = true;
  else if (status != UCS_ERR_CANCELED)
    fail(abi::remote_error, std::string("send failed: ") + ucs_status_string(status));
}

// ---- receive -------------------------------------------------------------------------

UcxRecvComm::UcxRecvComm(std::unique_ptr<UcxWorker> worker, Fd bootstrap, std::uint32_t tag_space,
                         std::string peer)
    : UcxComm(Kind::recv, std::move(worker), std::move(bootstrap), tag_space, std::move(peer)) {}

UcxRecvComm::~UcxRecvComm() { drain(nullptr); }

Request* UcxRecvComm::irecv(int n, void* const* data, const std::size_t* sizes, const int* tags) {
  check();
  Request* r = pool_.get(this);
  if (!r) return nullptr;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    Slot& slot = r->slots[i];
    slot = Slot{static_cast<char*>(data[i]), sizes[i], tags[i]};
    slot.request = r;
    ucp_request_param_t param{};
    // UCX 1.13 does not fill param.recv_info when a receive completes at once, and the
    // received length is needed: so every receive completes through the callback.
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = &UcxRecvComm::on_received;
    param.user_data = &slot;
    ++in_flight_;  // until on_received, which may run before ucp_tag_recv_nbx returns
    void* op = ucp_tag_recv_nbx(worker(), buffer_or_empty(slot.buf), slot.capacity, ucp_tag(slot.tag),
                                ~ucp_tag_t{0}, &param);
    if (UCS_PTR_IS_PTR(op)) {
      if (!slot.op_done) slot.op = op;  // else already released by on_received
    } else {
      --in_flight_;  // refused: no callback comes
      received(slot, UCS_PTR_STATUS(op), 0);
    }
  }
  check();  // a receive that failed at once (e.g. truncated) fails the comm now
  return r;
}

void UcxRecvComm::on_received(void* op, ucs_status_t status, const ucp_tag_recv_info_t* info,
                              void* user_data) {
  Slot& slot = *static_cast<Slot*>(user_data);
  auto* c = static_cast<UcxRecvComm*>(slot.request->owner);
  ucp_request_free(op);
  slot.op = nullptr;
  slot.op_done = true;
  --c->in_flight_;
  c->received(slot, status, status == UCS_OK && info ? info->length : 0);
}

void UcxRecvComm::received(Slot& slot, ucs_status_t status, std::size_t length) {
  if (status == UCS_ERR_CANCELED) return;  // only closing cancels
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    fail(abi::remote_error, "a message with tag " + std::to_string(slot.tag) + " does not fit the " +
                                std::to_string(slot.capacity) + "-byte receive buffer");
    return;
  }
  if (status != UCS_OK) {
    fail(abi::remote_error, std::string("receive failed: ") + ucs_status_string(status) + " (" + std::to_string(slot.capacity) + "-byte buffer)");
    return;
  }
  slot.matched = true;
  slot.bytes = length;
  Request& r = *slot.request;
  if (++r.slots_done == r.n) r.done = true;
}

}  // namespace strata::nccl_net
