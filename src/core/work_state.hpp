// Completion state shared by a Work handle and the progress engine.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

namespace strata::detail {

class Engine;

class WorkState {
 public:
  explicit WorkState(std::weak_ptr<Engine> engine = {}) : engine_(std::move(engine)) {}
  // Caller side: run queued operations on this thread until this one is done.
  void help();

  // Engine side: publish the outcome once.
  void finish(std::exception_ptr error = nullptr);

  bool done() const { return done_.load(std::memory_order_acquire); }
  // Caller side: spins briefly (the common case is a collective that is nearly done),
  // then sleeps.
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::weak_ptr<Engine> engine_;
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace strata::detail
