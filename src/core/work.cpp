#include <sched.h>

#include "transport/transport.hpp"
#include "core/engine.hpp"
#include "core/work_state.hpp"
#include "strata/errors.hpp"
#include "strata/work.hpp"

namespace strata {

namespace detail {

void WorkState::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void WorkState::help() {
  if (done()) return;
  if (auto e = engine_.lock()) e->run_until(*this);
}

bool WorkState::wait_until(std::chrono::steady_clock::time_point deadline) {
  const auto spin_until = std::chrono::steady_clock::now() + transport::spin();
  while (!done() && std::chrono::steady_clock::now() < spin_until) sched_yield();
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, deadline, [this] { return done(); });
}

}  // namespace detail

namespace {
void require_valid(const std::shared_ptr<detail::WorkState>& s) {
  if (!s) throw InvalidArgument("Work: this handle is empty (default-constructed)");
}
}  // namespace

void Work::wait() {
  require_valid(state_);
  state_->help();
  state_->wait_until(std::chrono::steady_clock::time_point::max());
  state_->rethrow();
}

bool Work::wait_until(std::chrono::steady_clock::time_point deadline) {
  require_valid(state_);
  if (!state_->wait_until(deadline)) return false;
  state_->rethrow();
  return true;
}

bool Work::test() const {
  require_valid(state_);
  return state_->done();
}

}  // namespace strata
