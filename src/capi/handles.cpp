#include "capi/handles.hpp"

namespace strata::capi {

static_assert(sizeof(strataUniqueId) == sizeof(UniqueId::bytes));

void RequestState::finish(std::unique_lock<std::mutex>& lock) {
  observing_ = true;
  lock.unlock();
  std::exception_ptr error;
  try {
    work_.wait();
  } catch (...) {
    error = std::current_exception();
  }
  // Recorded before waiters wake, so a caller that sees the failure also finds its
  // message on the communicator.
  if (error) {
    if (auto comm = comm_.lock()) {
      const char* what = nullptr;
      strataResult_t r = translate(error, &what);
      comm->record(r, op_, what);
    }
  }
  lock.lock();
  error_ = std::move(error);
  finished_ = true;
  observing_ = false;
  cv_.notify_all();
}

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

strataResult_t init_rank(const char* fn, strataComm_t* comm, int nranks, const strataUniqueId& id,
                         int rank, const strataConfig_t* config) noexcept {
  return guarded(fn, [&](Call&) {
    require_out(comm, "comm");
    *comm = nullptr;
    if (nranks < 1) invalid("nranks is " + std::to_string(nranks) + "; it must be at least 1");
    if (rank < 0 || rank >= nranks)
      invalid("rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
    UniqueId uid;
    std::memcpy(uid.bytes.data(), id.internal, uid.bytes.size());
    bool all_zero = true;
    for (char c : uid.bytes) all_zero = all_zero && c == 0;
    if (all_zero) invalid("commId is all zeros; fill it with strataGetUniqueId");
    const CommOptions opts = options_from(config);
    *comm = registry().add(std::make_shared<CommState>(Communicator(uid, rank, nranks, opts)));
    return strataSuccess;
  });
}

}  // namespace strata::capi
