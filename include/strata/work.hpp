// Handle to an enqueued operation. Collectives run on the communicator's progress
// engine in issue order; a Work observes one of them.
#pragma once

#include <chrono>
#include <memory>

namespace strata {

namespace detail {
class WorkState;
}

class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> s) : state_(std::move(s)) {}

  // Blocks until the operation finished; rethrows its error.
  void wait();
  // Returns false if the deadline passed first (the operation keeps running).
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  bool wait_for(std::chrono::milliseconds d) {
    return wait_until(std::chrono::steady_clock::now() + d);
  }
  // Non-blocking: true when finished (successfully or not; wait() tells which).
  bool test() const;
  bool valid() const { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace strata
