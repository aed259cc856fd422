// Lifecycle of the UCX transport: context, worker and address exchange; progress, waiting
// and abort; and a teardown that is bounded in time whatever the peers do.
#include "transport/ucx/ucx_transport.hpp"

#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "bootstrap/gather.hpp"
#include "strata/errors.hpp"
#include "transport/factory.hpp"
#include "transport/host_segment.hpp"
#include "transport/ucx/ucx_ports.hpp"

namespace strata::transport {

namespace {

// How long teardown waits for endpoints to flush before it destroys the worker anyway.
constexpr auto kCloseGrace = std::chrono::seconds(2);
// Upper bound on back-to-back ucp_worker_progress calls within one progress().
constexpr int kProgressRounds = 64;

std::string ucx_error(const char* what, ucs_status_t status) {
  return std::string("ucx: ") + what + ": " + ucs_status_string(status);
}

void check(ucs_status_t status, const char* what) {
  if (status != UCS_OK) throw TransportError(ucx_error(what, status));
}

}  // namespace

UcxTransport::UcxTransport(int rank, int size, bootstrap::Store& store, Clock::time_point deadline,
                           const net::PortRange& ports)
    : rank_(rank), size_(size) {
  if (size <= 0 || rank < 0 || rank >= size)
    throw InvalidArgument("ucx: rank " + std::to_string(rank) + " outside a world of " +
                          std::to_string(size));
  // Ranks travel in the tag bits above kTagBits.
  if (static_cast<std::uint64_t>(size - 1) >> (64 - kTagBits) != 0)
    throw InvalidArgument("ucx: world of " + std::to_string(size) +
                          " ranks does not fit the tag layout");
  eps_.assign(size, nullptr);
  peer_failure_.assign(size, std::string());
  ep_contexts_.reserve(size);
  for (int p = 0; p < size; ++p) ep_contexts_.push_back(EpContext{this, p});
  try {
    init_ucx(ports);
    exchange_addresses(store, deadline);
  } catch (...) {
    // The destructor does not run for a half-built object.
    if (worker_) ucp_worker_destroy(worker_);
    if (context_) ucp_cleanup(context_);
    throw;
  }
}

void UcxTransport::init_ucx(const net::PortRange& ports) {
  limit_ucx_tcp_ports(ports);
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "reading UCX configuration");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                      UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = static_cast<std::size_t>(size_);
  params.mt_workers_shared = 0;
  const ucs_status_t status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check(status, "initializing a context");

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
  check(ucp_worker_create(context_, &wparams, &worker_), "creating a worker");

  // Some transports cannot signal an fd; then wait_event falls back to short naps.
  if (ucp_worker_get_efd(worker_, &event_fd_) != UCS_OK) event_fd_ = -1;
}

void UcxTransport::exchange_addresses(bootstrap::Store& store, Clock::time_point deadline) {
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  check(ucp_worker_get_address(worker_, &address, &length), "querying the worker address");
  const std::string mine(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker_, address);
  // The record is "<host identity>\0<worker address>"; the address is binary.
  const std::string identity = host_identity();
  const std::vector<std::string> values = bootstrap::allgather(store, "ucx", rank_, size_, identity + '\0' + mine, deadline);
  addresses_.resize(size_);
  same_host_.assign(size_, false);
  addresses_[rank_] = mine;
  same_host_[rank_] = true;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const std::string& record = values[static_cast<std::size_t>(p)];
    const auto split = record.find('\0');
    if (split == std::string::npos)
      throw TransportError("ucx: rank " + std::to_string(p) +
                           " published a malformed address record");
    same_host_[p] = record.compare(0, split, identity) == 0;
    addresses_[p] = record.substr(split + 1);
  }
}

ucp_ep_h UcxTransport::endpoint(int peer) {
  if (eps_[peer]) return eps_[peer];
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(addresses_[peer].data());
  // PEER mode makes a dead peer fail the requests on its endpoint instead of hanging
  // them, but UCX 1.13 only offers it on transports with failure detection (TCP, RDMA):
  // shared memory and self would be excluded and local traffic pushed onto TCP loopback.
  // So peers on this host keep those fast paths, and rely on the caller's deadline (and
  // on UCX reporting the errors it does see) when one of them dies.
  params.err_mode = same_host_[peer] ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxTransport::on_ep_error;
  params.err_handler.arg = &ep_contexts_[peer];
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = ucp_ep_create(worker_, &params, &ep);
  if (status != UCS_OK)
    throw TransportError(ucx_error(("connecting to rank " + std::to_string(peer)).c_str(),
                                   status));
  eps_[peer] = ep;
  return ep;
}

void UcxTransport::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* ctx = static_cast<EpContext*>(arg);
  UcxTransport& self = *ctx->self;
  // UCX is in the middle of its own failure handling here; cancelling requests now would
  // run their callbacks re-entrantly. Note the failure and act once progress returned.
  if (self.peer_failure_[ctx->peer].empty()) {
    self.peer_failure_[ctx->peer] = "connection to rank " + std::to_string(ctx->peer) +
                                    " failed: " + ucs_status_string(status);
    self.failed_peers_.push_back(ctx->peer);
  }
}

void UcxTransport::handle_failed_peers() {
  while (!failed_peers_.empty()) {
    const int peer = failed_peers_.back();
    failed_peers_.pop_back();
    // Receives from a peer we know is gone would wait forever; sends on its endpoint
    // are failed by UCX itself, and the force-close below completes any stragglers.
    fail_pending(peer_failure_[peer], peer);
    if (ucp_ep_h ep = eps_[peer]) {
      eps_[peer] = nullptr;
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &param);
      if (UCS_PTR_IS_PTR(req)) closing_.push_back(req);
    }
  }
}

bool UcxTransport::progress() {
  bool any = false;
  if (!abort_applied_ && aborted()) {
    apply_abort();
    any = true;
  }
  // Drain what is ready, but return to the caller even if a peer keeps the worker busy.
  for (int round = 0; round < kProgressRounds && ucp_worker_progress(worker_) != 0; ++round)
    any = true;
  if (!failed_peers_.empty()) {
    handle_failed_peers();
    any = true;
  }
  if (!closing_.empty()) drain_closing(Clock::time_point::min());
  return any;
}

void UcxTransport::wait_event(std::chrono::microseconds max) {
  if (aborted() || max <= std::chrono::microseconds::zero()) return;
  if (event_fd_ < 0) {
    std::this_thread::sleep_for(std::min(max, std::chrono::microseconds(100)));
    return;
  }
  // BUSY means events arrived since the last progress: the caller should progress now.
  // An abort() that raced with the check above has signalled the worker, so either arm
  // reports BUSY or the poll below wakes up.
  const ucs_status_t status = ucp_worker_arm(worker_);
  if (status == UCS_ERR_BUSY) return;
  if (status != UCS_OK) throw TransportError(ucx_error("arming the worker", status));
  pollfd pfd{event_fd_, POLLIN, 0};
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(max);
  const timespec ts{static_cast<time_t>(secs.count()),
                    static_cast<long>((max - secs).count() * 1000)};
  ::ppoll(&pfd, 1, &ts, nullptr);
}

void UcxTransport::abort(const std::string& why) {
  abort_.set(why);
  // Wakes an engine thread blocked in wait_event; safe from any thread.
  ucp_worker_signal(worker_);
}

std::string UcxTransport::abort_text() const { return abort_.reason(); }

void UcxTransport::apply_abort() {
  abort_applied_ = true;
  fail_pending(abort_text(), -1);
  // Forcing the endpoints closed completes every send still inside UCX (as cancelled),
  // so no user buffer stays referenced longer than necessary.
  close_endpoints(true);
}

void UcxTransport::close_endpoints(bool force) {
  for (auto& ep : eps_) {
    if (!ep) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(req)) closing_.push_back(req);
    ep = nullptr;
  }
}

void UcxTransport::drain_closing(Clock::time_point until) {
  for (;;) {
    std::erase_if(closing_, [](void* req) {
      if (ucp_request_check_status(req) == UCS_INPROGRESS) return false;
      ucp_request_free(req);
      return true;
    });
    if (closing_.empty() || Clock::now() >= until) return;
    ucp_worker_progress(worker_);
  }
}

UcxTransport::~UcxTransport() {
  // A caller may still hold RequestPtrs; they must end up failed, never pending forever.
  if (!abort_applied_) fail_pending(aborted() ? abort_text() : "ucx: transport closed", -1);
  // After an abort (or a failed peer) flushing could wait on a peer that will never
  // answer; otherwise a flush delivers what is still queued. Either way the wait is
  // bounded, and failed_peers_ is handled first so those endpoints are forced.
  handle_failed_peers();
  close_endpoints(aborted());
  drain_closing(Clock::now() + kCloseGrace);
  for (void* req : closing_) ucp_request_free(req);
  closing_.clear();
  // Destroying the worker may still complete stuck sends through their callbacks, which
  // reach pending_; so it is cleared only afterwards.
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
  pending_.clear();
}

std::unique_ptr<Transport> make_ucx_transport(int rank, int size, bootstrap::Store& store,
                                              Clock::time_point deadline, const net::PortRange& ports) {
  return std::make_unique<UcxTransport>(rank, size, store, deadline, ports);
}

}  // namespace strata::transport
