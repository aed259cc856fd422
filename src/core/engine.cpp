#include "core/engine.hpp"

#include <sched.h>

#include "core/config.hpp"
#include "strata/errors.hpp"

namespace strata::detail {

Engine::Engine(transport::Transport& t, OnError on_error)
    : transport_(t), on_error_(std::move(on_error)), thread_([this] { loop(); }) {}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Engine::submit(std::shared_ptr<WorkState> work, Run run) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Op{std::move(work), std::move(run)});
    queued_.fetch_add(1, std::memory_order_release);
    wake = sleeping_;
  }
  if (wake) cv_.notify_one();
}

void Engine::fail(const std::shared_ptr<WorkState>& w, std::exception_ptr e) {
  on_error_(e);
  w->finish(e);
}

bool Engine::poll_waiting() {
  bool any = false;
  const auto now = transport::Clock::now();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto& p = it->pending;
    try {
      if (transport_.aborted()) {
        throw AbortedError(p.what + ": " + transport_.abort_reason());
      } else if (p.request->done()) {
        if (!p.request->error().empty()) throw TransportError(p.what + ": " + p.request->error());
        if (p.on_complete) p.on_complete();
        it->work->finish();
      } else if (now >= p.deadline) {
        throw TimeoutError(p.what + " timed out: rank " + std::to_string(p.request->peer()) +
                           " did not answer before the deadline");
      } else {
        ++it;
        continue;
      }
    } catch (...) {
      fail(it->work, std::current_exception());
    }
    it = waiting_.erase(it);
    any = true;
  }
  return any;
}

void Engine::loop() {
  auto idle_since = transport::Clock::now();
  for (;;) {
    std::optional<Op> op;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!queue_.empty()) {
        op = std::move(queue_.front());
        queue_.pop_front();
        queued_.fetch_sub(1, std::memory_order_relaxed);
      } else if (waiting_.empty()) {
        if (stopping_) return;
        // Stay awake a moment: the next collective usually follows at once.
        if (transport::Clock::now() - idle_since > transport::spin()) {
          sleeping_ = true;
          cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
          sleeping_ = false;
          idle_since = transport::Clock::now();
        }
      }
    }
    if (op) {
      try {
        if (auto p = op->run()) waiting_.push_back(Waiting{op->work, std::move(*p)});
        else op->work->finish();
      } catch (...) {
        fail(op->work, std::current_exception());
      }
      idle_since = transport::Clock::now();
      continue;
    }
    if (!waiting_.empty()) {
      transport_.progress();
      if (!poll_waiting() && queued_.load(std::memory_order_acquire) == 0)
        transport_.wait_event(std::chrono::microseconds(200));
      idle_since = transport::Clock::now();
    } else {
      sched_yield();
    }
  }
}

}  // namespace strata::detail
