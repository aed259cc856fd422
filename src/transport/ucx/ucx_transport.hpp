// The UCX (ucp tag API) implementation of the transport seam: shared memory, RDMA or TCP,
// whatever UCX picks for each peer (UCX_TLS and friends from the environment apply).
//
// One worker in single-thread mode, driven only by the engine thread. abort() is the one
// entry point other threads use, and it touches nothing but an atomic flag, a mutex-guarded
// string and ucp_worker_signal (which only writes the worker's event fd).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/listener.hpp"
#include "bootstrap/store.hpp"
#include "transport/abort_state.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/ucx_request.hpp"

namespace strata::transport {

class UcxTransport final : public Transport, public LinkReport {
 public:
  UcxTransport(int rank, int size, bootstrap::Store& store, Clock::time_point deadline,
               const net::PortRange& ports = {});
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  const char* name() const override { return "ucx"; }
  // Each message above UCX's rendezvous threshold pays a handshake before its single
  // copy. On one host (BENCHMARKS.md, "Pipeline chunk over UCX"), 2 ranks ran 4 MiB
  // 1.37x and 16-64 MiB 1.07-1.09x faster with 4 MiB chunks than with 1 MiB; 4 ranks,
  // whose segments are smaller, stayed within the noise.
  const LinkReport& report() const override { return *this; }
  LinkProfile profile() const override { return {std::size_t{4} << 20}; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  RequestPtr isend(int peer, Tag tag, const void* buf, std::size_t bytes) override;
  RequestPtr irecv(int peer, Tag tag, void* buf, std::size_t capacity) override;
  bool probe(int peer, Tag tag) override;
  bool progress() override;
  void wait_event(std::chrono::microseconds max) override;
  void abort(const std::string& why) override;
  bool aborted() const override { return abort_.aborted(); }
  std::string abort_reason() const override { return abort_text(); }

 private:
  // What the endpoint error handler needs to know: which peer failed.
  struct EpContext {
    UcxTransport* self;
    int peer;
  };

  static void on_send(void* ucx_req, ucs_status_t status, void* user);
  static void on_recv(void* ucx_req, ucs_status_t status, const ucp_tag_recv_info_t* info,
                      void* user);
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  void init_ucx(const net::PortRange& ports);
  void exchange_addresses(bootstrap::Store& store, Clock::time_point deadline);
  ucp_ep_h endpoint(int peer);
  std::shared_ptr<UcxRequest> start(UcxRequest::Kind kind, int peer, std::size_t size);
  void launched(const std::shared_ptr<UcxRequest>& req, ucs_status_ptr_t ret,
                std::size_t immediate_bytes);
  void complete(UcxRequest* req, ucs_status_t status, std::size_t length);
  std::string failure_text(const UcxRequest& req, ucs_status_t status,
                           std::size_t length) const;
  void fail_pending(const std::string& why, int only_peer);
  void apply_abort();
  void handle_failed_peers();
  void close_endpoints(bool force);
  void drain_closing(Clock::time_point until);
  std::string abort_text() const;

  int rank_;
  int size_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;  // -1 when no transport in use can wake us; wait_event then naps
  std::vector<std::string> addresses_;       // worker addresses, by rank
  std::vector<bool> same_host_;              // by rank: may share memory with us
  std::vector<ucp_ep_h> eps_;                // created on first send, by rank
  std::vector<EpContext> ep_contexts_;       // stable addresses for the error handler
  std::vector<std::string> peer_failure_;    // non-empty once a peer's endpoint failed
  std::vector<int> failed_peers_;            // reported by UCX, not yet handled
  std::vector<void*> closing_;               // ucp_ep_close_nbx requests in flight
  // Requests UCX still owns, kept alive here so callers may drop their RequestPtr early.
  std::unordered_map<UcxRequest*, std::shared_ptr<UcxRequest>> pending_;

  AbortState abort_;
  bool abort_applied_ = false;  // engine thread only
};

}  // namespace strata::transport
