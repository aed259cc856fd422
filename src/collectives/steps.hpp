// Resumable work: every algorithm, and every level of a hierarchical plan, is a C++20
// coroutine returning Steps. It suspends where it would block (`co_await ctx.wait(r)`)
// and its context's driver (Context::run) resumes it once the awaited requests are done,
// so one thread can keep several pieces of work in flight (a pipelined plan's stages)
// with the same code that runs one collective alone.
//
// Steps start lazily. `co_await f(...)` runs f within the awaiting coroutine and
// rethrows its failure there. Context::start runs one up to its first suspension and
// leaves it in flight beside its caller, to be awaited later.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>

namespace strata::collectives {

class [[nodiscard]] Steps {
 public:
  struct promise_type;
  using Handle = std::coroutine_handle<promise_type>;

  struct promise_type {
    std::coroutine_handle<> continuation;  // whoever awaits this; none for a root
    std::exception_ptr error;
    // Where a started piece of work that nobody awaits yet reports its failure, so
    // its driver can stop at once instead of at the deadline (Context::start).
    std::exception_ptr* unawaited_error = nullptr;

    // Frames come from a per-thread cache of recent ones: a small collective creates a
    // few each call, and the engine thread creates them call after call.
    static void* operator new(std::size_t bytes);
    static void operator delete(void* frame, std::size_t bytes) noexcept;

    Steps get_return_object() { return Steps(Handle::from_promise(*this)); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Final {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(Handle h) noexcept {
        auto& p = h.promise();
        if (p.continuation) return p.continuation;
        if (p.error && p.unawaited_error && !*p.unawaited_error) *p.unawaited_error = p.error;
        return std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }
  };

  Steps() = default;
  Steps(Steps&& o) noexcept : h_(std::exchange(o.h_, {})), started_(std::exchange(o.started_, false)) {}
  Steps& operator=(Steps&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, {});
      started_ = std::exchange(o.started_, false);
    }
    return *this;
  }
  Steps(const Steps&) = delete;
  Steps& operator=(const Steps&) = delete;
  ~Steps() { reset(); }

  bool done() const { return !h_ || h_.done(); }
  // Runs it until its first suspension or its end; once.
  void start(std::exception_ptr* unawaited_error = nullptr) {
    if (started_ || !h_) return;
    started_ = true;
    h_.promise().unawaited_error = unawaited_error;
    h_.resume();
  }
  // After done(): its failure, if it had one.
  void rethrow() const {
    if (h_ && h_.promise().error) std::rethrow_exception(h_.promise().error);
  }

  struct Awaiter {
    Steps& s;
    bool await_ready() const noexcept { return s.done(); }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
      s.h_.promise().continuation = awaiting;
      s.h_.promise().unawaited_error = nullptr;  // its awaiter hears of it now
      if (s.started_) return std::noop_coroutine();  // in flight: resumes `awaiting` when it ends
      s.started_ = true;
      return s.h_;
    }
    void await_resume() const { s.rethrow(); }
  };
  Awaiter operator co_await() & noexcept { return Awaiter{*this}; }
  Awaiter operator co_await() && noexcept { return Awaiter{*this}; }

 private:
  explicit Steps(Handle h) : h_(h) {}
  void reset() {
    if (h_) h_.destroy();
    h_ = {};
  }

  Handle h_{};
  bool started_ = false;
};

}  // namespace strata::collectives
