#include "ucx_context.hpp"

#include <mutex>

#include "core/link_settings.hpp"
#include "transport/ucx/ucx_ports.hpp"
#include "errors.hpp"
#include "log.hpp"

namespace strata::nccl_net {

namespace {

// Worker creation and destruction touch the shared context; they are rare (once per
// connection), so one lock around them is simpler than reasoning about UCX's own.
std::mutex& context_mutex() {
  static auto* mu = new std::mutex;  // never destroyed, like the context
  return *mu;
}

ucp_context_h make_context() {
  transport::limit_ucx_tcp_ports(detail::socket_settings().ports);
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);  // honours UCX_* variables
  if (s != UCS_OK) ucx_failure("ucp_config_read", s, abi::system_error);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 1;  // workers are used from several threads (one each at a time)
  params.name = "strata-nccl-net";
  ucp_context_h context = nullptr;
  s = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (s != UCS_OK) ucx_failure("ucp_init", s, abi::system_error);
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  log::info("UCX %u.%u.%u context ready for same-region connections", major, minor, release);
  return context;
}

}  // namespace

ucp_context_h ucx_context() {
  std::lock_guard lock(context_mutex());
  static ucp_context_h context = nullptr;  // a failed attempt is retried on the next connection
  if (!context) context = make_context();
  return context;
}

void ucx_failure(const std::string& what, ucs_status_t status, abi::Result code) {
  throw NetError(code, what + ": " + ucs_status_string(status));
}

UcxWorker::UcxWorker() {
  ucp_context_h context = ucx_context();
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  std::lock_guard lock(context_mutex());
  const ucs_status_t s = ucp_worker_create(context, &params, &worker_);
  if (s != UCS_OK) ucx_failure("ucp_worker_create", s, abi::system_error);
}

UcxWorker::~UcxWorker() {
  std::lock_guard lock(context_mutex());
  ucp_worker_destroy(worker_);
}

std::vector<char> UcxWorker::address() const {
  ucp_address_t* addr = nullptr;
  std::size_t len = 0;
  const ucs_status_t s = ucp_worker_get_address(worker_, &addr, &len);
  if (s != UCS_OK) ucx_failure("ucp_worker_get_address", s, abi::system_error);
  std::vector<char> out(reinterpret_cast<const char*>(addr), reinterpret_cast<const char*>(addr) + len);
  ucp_worker_release_address(worker_, addr);
  return out;
}

bool UcxWorker::progress() const {
  bool any = false;
  while (ucp_worker_progress(worker_) != 0) any = true;
  return any;
}

}  // namespace strata::nccl_net
