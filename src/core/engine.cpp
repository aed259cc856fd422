#include "core/engine.hpp"

#include <sched.h>

#include "strata/errors.hpp"

namespace strata::detail {

namespace {
// How long an operation nobody waits for sits before the engine thread takes it: long
// enough for a caller that issues and then waits to get there first.
constexpr auto kGrace = std::chrono::microseconds(30);
// How often an otherwise idle engine drives a transport that still delivers sends which
// are already done: often enough to keep a WAN link's socket buffers filled.
constexpr auto kNudge = std::chrono::microseconds(500);
}  // namespace

Engine::Engine(transport::Transport& t, OnError on_error)
    : transport_(t), on_error_(std::move(on_error)) {}

void Engine::start() { thread_ = std::thread([this] { loop(); }); }

Engine::~Engine() { stop(); }

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<WorkState> Engine::submit(Run run) {
  auto work = std::make_shared<WorkState>(weak_from_this());
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Op{work, std::move(run), transport::Clock::now()});
    wake = sleeping_;
  }
  if (wake) cv_.notify_one();
  return work;
}

std::optional<Engine::Op> Engine::pop(bool only_if_stale) {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) return std::nullopt;
  if (only_if_stale && transport::Clock::now() - queue_.front().queued_at < kGrace)
    return std::nullopt;
  Op op = std::move(queue_.front());
  queue_.pop_front();
  return op;
}

void Engine::fail(const std::shared_ptr<WorkState>& w, std::exception_ptr e) {
  w->finish(on_error_(e));
}

void Engine::execute(Op& op) {
  try {
    if (auto p = op.run()) {
      waiting_.push_back(Waiting{op.work, std::move(*p)});
      waiting_count_.store(waiting_.size(), std::memory_order_release);
    } else {
      op.work->finish();
    }
  } catch (...) {
    fail(op.work, std::current_exception());
  }
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
        throw TimeoutError(transport::with_trouble(transport_, p.what + " timed out: rank " +
                                                                   std::to_string(p.request->peer()) +
                                                                   " did not answer before the deadline"));
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
  waiting_count_.store(waiting_.size(), std::memory_order_release);
  return any;
}

void Engine::run_until(const WorkState& work) {
  std::lock_guard<std::mutex> exec(exec_mu_);
  while (!work.done()) {
    if (auto op = pop(false)) {
      execute(*op);
      continue;
    }
    // Ours is a posted point-to-point operation: drive the transport until it lands.
    transport_.progress();
    if (!poll_waiting() && !work.done()) transport_.wait_event(std::chrono::microseconds(200));
  }
}

void Engine::loop() {
  auto idle_since = transport::Clock::now();
  for (;;) {
    bool have_queue, have_waiting, tick = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // A fresh operation is left to the caller who is about to wait for it: contending
      // for exec_mu_ here would cost that caller a futex sleep.
      have_queue = !queue_.empty() &&
                   (stopping_ || transport::Clock::now() - queue_.front().queued_at >= kGrace);
      have_waiting = waiting_count_.load(std::memory_order_acquire) > 0;
      if (queue_.empty() && !have_waiting) {
        if (stopping_) return;
        if (!transport_.settled()) {
          // Sends already done still have bytes on the way (the WAN link): nudge the
          // transport now and then without holding exec_mu_ while waiting, so a caller's
          // next operation never waits behind it (the caller's own waits drive it too).
          // When stopping, the transport's destructor sees them delivered, boundedly.
          lock.unlock();
          {
            std::unique_lock<std::mutex> exec(exec_mu_, std::try_to_lock);
            if (exec.owns_lock()) transport_.progress();
          }
          lock.lock();
          sleeping_ = true;
          cv_.wait_for(lock, kNudge, [this] { return !queue_.empty() || stopping_; });
          sleeping_ = false;
          idle_since = transport::Clock::now();
          continue;
        }
        if (transport::Clock::now() - idle_since > transport::spin()) {
          sleeping_ = true;
          tick = !cv_.wait_for(lock, std::chrono::milliseconds(100),
                               [this] { return !queue_.empty() || stopping_; });
          sleeping_ = false;
          idle_since = transport::Clock::now();
          if (!tick) continue;
        }
      }
    }
    if (tick) {
      // Idle, the transport still answers now and then: a peer's new connection must
      // finish the job's handshake within its deadline, whenever this rank next calls.
      std::unique_lock<std::mutex> exec(exec_mu_, std::try_to_lock);
      if (exec.owns_lock()) transport_.progress();
      continue;
    }
    if (have_queue || have_waiting) {
      // Blocks while a caller runs operations itself; no point spinning meanwhile.
      std::unique_lock<std::mutex> exec(exec_mu_);
      {
        bool stopping;
        {
          std::lock_guard<std::mutex> lock(mu_);
          stopping = stopping_;
        }
        if (auto op = pop(!stopping)) {
          execute(*op);
          idle_since = transport::Clock::now();
          continue;
        }
        if (!waiting_.empty()) {
          transport_.progress();
          if (!poll_waiting()) transport_.wait_event(std::chrono::microseconds(200));
          idle_since = transport::Clock::now();
          continue;
        }
      }
    }
    sched_yield();
  }
}

}  // namespace strata::detail
