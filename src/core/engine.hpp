// The progress engine: one thread per communicator that runs operations in issue order.
// Collectives run to completion on it; point-to-point operations only post their request
// and finish later, so a send and a matching receive queued on two ranks in either order
// cannot deadlock. Only this thread touches the transport (abort() excepted).
#pragma once

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

class Engine {
 public:
  using Run = std::function<std::optional<Pending>()>;
  using OnError = std::function<void(const std::exception_ptr&)>;

  Engine(transport::Transport& t, OnError on_error);
  ~Engine();  // finishes what was queued, then joins
  void submit(std::shared_ptr<WorkState> work, Run run);

 private:
  struct Op {
    std::shared_ptr<WorkState> work;
    Run run;
  };
  struct Waiting {
    std::shared_ptr<WorkState> work;
    Pending pending;
  };
  void loop();
  bool poll_waiting();  // true if any finished
  void fail(const std::shared_ptr<WorkState>& w, std::exception_ptr e);

  transport::Transport& transport_;
  OnError on_error_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  std::atomic<std::size_t> queued_{0};
  bool stopping_ = false;
  bool sleeping_ = false;
  std::deque<Waiting> waiting_;  // engine thread only
  std::thread thread_;
};

}  // namespace strata::detail
