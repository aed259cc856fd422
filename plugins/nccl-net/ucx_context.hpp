// The UCX objects the same-region path is built on: one ucp context per process and one
// ucp worker per send or receive comm.
//
// Why a worker per comm rather than one shared worker: NCCL drives different comms from
// different threads at once (the service thread connects while the progress thread tests),
// and a comm's progress must not wait on another comm's. With its own worker, a comm is
// progressed only under its own mutex, exactly like the TCP comms, so the worker can run
// in UCS_THREAD_MODE_SERIALIZED (several threads, one at a time: NCCL's contract) and
// needs no UCX-internal locking on the hot path. The cost is per-worker resources (a
// shared-memory FIFO, and a listening socket per TCP device when UCX uses TCP), paid once
// per connection, which NCCL sets up at communicator creation.
#pragma once

#include <ucp/api/ucp.h>

#include <string>
#include <vector>

#include "nccl_abi.hpp"

namespace strata::nccl_net {

// The process-wide context, made on first use (thread-safe) and never destroyed: NCCL's
// proxy threads can outlive static destructors. The plugin is linked -z nodelete so that
// NCCL's dlclose cannot unload libucp under it either.
ucp_context_h ucx_context();

// Throws NetError(code) with "what: <UCX's description of status>".
[[noreturn]] void ucx_failure(const std::string& what, ucs_status_t status, abi::Result code);

class UcxWorker {
 public:
  UcxWorker();
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;
  ucp_worker_h get() const { return worker_; }
  // The packed address a peer's ucp_ep_create needs to reach this worker.
  std::vector<char> address() const;
  // Runs every callback that is due; true when anything happened.
  bool progress() const;

 private:
  ucp_worker_h worker_ = nullptr;
};

}  // namespace strata::nccl_net
