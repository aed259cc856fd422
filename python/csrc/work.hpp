// A torch Work over one or more strata operations, and the thread that completes them.
// strata runs a communicator's operations in issue order, so one thread waiting for the
// works in the order they were issued sees each finish about when it does; it copies
// staged results back, then completes the torch side (wait(), is_completed(), and the
// future DDP's comm hooks chain on). Completing futures there rather than on strata's
// engine keeps user callbacks off the thread that moves the bytes.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "staging.hpp"
#include "strata/work.hpp"

namespace strata::torch_backend {

class StrataWork : public c10d::Work {
 public:
  StrataWork(int rank, c10d::OpType op, std::vector<at::Tensor> outputs, std::vector<c10::Device> devices);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  // A receive from any source: the rank it came from, written by strata before the op
  // completes (read after wait(), as c10d's callers do).
  int sourceRank() const override { return source; }
  int source = -1;

  // What the completion thread needs.
  std::vector<strata::Work> ops;
  std::unique_ptr<Stager> stager;
  std::function<void()> after;  // unpacking of a result (e.g. into an output list), before the copy back
  std::vector<at::Tensor> keep;  // inputs the operation reads until it is done

  // Completion thread: waits for ops, unpacks, copies back, completes.
  void complete();

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// torch's exception for a failed collective (torch.distributed.DistBackendError in
// Python), carrying strata's message.
std::exception_ptr backend_error(const std::string& what);

class CompletionThread {
 public:
  CompletionThread();
  ~CompletionThread();  // completes everything queued, then stops
  void push(c10::intrusive_ptr<StrataWork> w);
  // Blocks until everything pushed so far is complete.
  void drain();
  // drain() on every completion thread of the process: at interpreter exit, before Python
  // finalizes, since a work's last reference may hold tensors that need the GIL to go,
  // and a thread that asks for the GIL during finalization is ended mid-stack.
  static void drain_all();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<c10::intrusive_ptr<StrataWork>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace strata::torch_backend
