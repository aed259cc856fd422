// Same-region connections over UCX's tag API (STRATA_NET_INTRA=ucx, the default). UCX
// picks the transport: shared memory between processes on one host, RDMA on
// InfiniBand/RoCE, TCP otherwise.
//
// Each NCCL message is one ucp tag message. The 64-bit ucp tag carries the NCCL tag in
// its low half and, in its high half, a random id the listener chose for the connection,
// so a message can only ever match a receive of its own connection (each comm also has
// its own worker, see ucx_context.hpp; the id keeps that true should workers be shared).
// A grouped irecv of n buffers is n ucp receives; UCX matches a sender's messages in
// order per tag, which is NCCL's rule. Completions arrive in callbacks run by
// ucp_worker_progress inside test(), under the comm's mutex.
//
// The bootstrap TCP socket that carried the hello and the worker address stays open,
// unused, for the comm's lifetime: UCX itself (without UCP_ERR_HANDLING_MODE_PEER, which
// would rule out some transports) never reports a vanished peer, so the socket's EOF is
// how a comm learns the other side has closed or died, and how a receive or send waiting
// for it fails instead of hanging.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm.hpp"
#include "socket.hpp"
#include "ucx_context.hpp"

namespace strata::nccl_net {

// What both directions share: the worker, the liveness socket, the connection's tag
// space, the ucp operations in flight, and closing.
class UcxComm : public TransferComm {
 protected:
  UcxComm(Kind kind, std::unique_ptr<UcxWorker> worker, Fd bootstrap, std::uint32_t tag_space,
          std::string peer);
  ~UcxComm();
  // Progresses the worker; when that finds nothing to do, looks at the liveness socket.
  // Throws NetError(remote_error) once the peer is gone and an operation still waits.
  void progress();
  ucp_worker_h worker() const { return worker_->get(); }
  ucp_tag_t ucp_tag(int nccl_tag) const {
    return (ucp_tag_t{tag_space_} << 32) | static_cast<std::uint32_t>(nccl_tag);
  }
  // Whether the peer is known to be gone (its end of the bootstrap socket closed), as of
  // the last look; peek_bootstrap() looks now.
  bool peer_gone() const { return peer_gone_; }
  void peek_bootstrap();
  // Closing, for the derived destructors: cancels our receives, waits (bounded) for
  // every operation and `close_request` (an ep close, or null) to finish, then frees
  // whatever is left so that no callback can run after the comm is gone.
  void drain(void* close_request) noexcept;
  std::size_t in_flight_ = 0;  // ucp operations whose callback has not run

 private:
  // Declaration order is destruction order, reversed: the worker (and with it every
  // endpoint) goes first, the socket after, so the peer sees EOF only once our side's
  // data has been flushed.
  Fd bootstrap_;
  std::unique_ptr<UcxWorker> worker_;
  std::uint32_t tag_space_;
  bool peer_gone_ = false;
  std::int64_t gone_at_ns_ = 0, next_peek_ns_ = 0;
};

class UcxSendComm final : public UcxComm {
 public:
  // Connects an endpoint to the receiving worker at `remote_address`.
  UcxSendComm(std::unique_ptr<UcxWorker> worker, const std::vector<char>& remote_address, Fd bootstrap,
              std::uint32_t tag_space, std::string peer);
  ~UcxSendComm();
  // nullptr when every request slot is in flight. Arguments are checked by post_send.
  Request* isend(const void* data, std::size_t size, int tag);

 private:
  friend class TransferComm;  // poll() runs progress()
  static void on_sent(void* op, ucs_status_t status, void* user_data);
  void sent(Request* r, ucs_status_t status);
  ucp_ep_h ep_ = nullptr;
};

class UcxRecvComm final : public UcxComm {
 public:
  UcxRecvComm(std::unique_ptr<UcxWorker> worker, Fd bootstrap, std::uint32_t tag_space, std::string peer);
  ~UcxRecvComm();
  // nullptr when every request slot is in flight. Arguments are checked by post_recv.
  Request* irecv(int n, void* const* data, const std::size_t* sizes, const int* tags);

 private:
  friend class TransferComm;
  static void on_received(void* op, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data);
  void received(Slot& slot, ucs_status_t status, std::size_t length);
};

}  // namespace strata::nccl_net
