// The abort flag every transport keeps: set from any thread, read on the hot path
// without a lock; the first reason given wins.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

namespace strata::transport {

class AbortState {
 public:
  void set(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (reason_.empty()) reason_ = why;
    }
    flag_.store(true, std::memory_order_release);
  }
  bool aborted() const { return flag_.load(std::memory_order_acquire); }
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return "aborted: " + reason_;
  }

 private:
  std::atomic<bool> flag_{false};
  mutable std::mutex mu_;
  std::string reason_;
};

}  // namespace strata::transport
