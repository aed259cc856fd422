// The progress engine runs a communicator's operations in issue order. Collectives run
// to completion; point-to-point operations only post their request and finish later, so
// a send and a matching receive queued on two ranks in either order cannot deadlock.
//
// Whoever holds exec_mu_ may touch the transport: the engine thread, or a caller
// blocked in Work::wait, which runs queued operations itself up to its own. The common
// "issue, then wait" pattern thus costs no thread hand-off; operations nobody waits for
// are picked up by the engine thread after a short grace period.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/work_state.hpp"
#include "transport/transport.hpp"

namespace strata::detail {

// An operation that has posted its request and waits for it in the background.
struct Pending {
  transport::RequestPtr request;
  transport::Clock::time_point deadline;
  std::string what;                   // for errors: "send #3 to rank 2"
  std::function<void()> on_complete;  // may throw (e.g. wrong size)
};

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  using Run = std::function<std::optional<Pending>()>;
  // Told of every failure; returns the error the operation fails with (the communicator
  // may know a better explanation than the symptom).
  using OnError = std::function<std::exception_ptr(const std::exception_ptr&)>;

  Engine(transport::Transport& t, OnError on_error);
  ~Engine();
  void start();  // after construction by make_shared, so the thread may use weak_from_this
  void stop();   // finishes what was queued, then joins
  std::shared_ptr<WorkState> submit(Run run);
  // Runs queued operations on the calling thread until `work` is done.
  void run_until(const WorkState& work);

 private:
  struct Op {
    std::shared_ptr<WorkState> work;
    Run run;
    transport::Clock::time_point queued_at;
  };
  struct Waiting {
    std::shared_ptr<WorkState> work;
    Pending pending;
  };
  void loop();
  std::optional<Op> pop(bool only_if_stale);
  void execute(Op& op);  // exec_mu_ held
  bool poll_waiting();   // exec_mu_ held; true if any finished
  void fail(const std::shared_ptr<WorkState>& w, std::exception_ptr e);

  transport::Transport& transport_;
  OnError on_error_;
  std::mutex mu_;  // queue_ and flags
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool stopping_ = false;
  bool sleeping_ = false;
  std::mutex exec_mu_;           // the right to run operations and touch the transport
  std::deque<Waiting> waiting_;  // guarded by exec_mu_
  std::atomic<std::size_t> waiting_count_{0};
  std::thread thread_;
};

}  // namespace strata::detail
