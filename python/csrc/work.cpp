#include "work.hpp"

#include <set>

#include <c10/util/Exception.h>

#include "strata/errors.hpp"

namespace strata::torch_backend {

std::exception_ptr backend_error(const std::string& what) {
  try {
    C10_THROW_ERROR(DistBackendError, "strata: " + what);
  } catch (...) {
    return std::current_exception();
  }
}

StrataWork::StrataWork(int rank, c10d::OpType op, std::vector<at::Tensor> outputs, std::vector<c10::Device> devices)
    : c10d::Work(rank, op),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       std::move(devices))) {}

void StrataWork::complete() {
  std::exception_ptr error;
  try {
    for (auto& op : ops) op.wait();  // each bounded by its own deadline
    if (stager)
      stager->finish(after);
    else if (after)
      after();
  } catch (const strata::Error& e) {
    error = backend_error(e.what());
  } catch (const std::exception& e) {
    error = backend_error(std::string("completing the operation: ") + e.what());
  }
  ops.clear();
  keep.clear();
  stager.reset();
  if (error) {
    finish(error);
    future_->setError(error);
  } else {
    finish();
    future_->markCompleted(c10::IValue(outputs_));
  }
}

namespace {

std::mutex live_mu;
std::set<CompletionThread*>& live() {
  static std::set<CompletionThread*> threads;
  return threads;
}

}  // namespace

CompletionThread::CompletionThread() : thread_([this] { run(); }) {
  std::lock_guard<std::mutex> lock(live_mu);
  live().insert(this);
}

void CompletionThread::drain_all() {
  std::lock_guard<std::mutex> lock(live_mu);
  for (auto* t : live()) t->drain();
}

CompletionThread::~CompletionThread() {
  {
    std::lock_guard<std::mutex> lock(live_mu);
    live().erase(this);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CompletionThread::push(c10::intrusive_ptr<StrataWork> w) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(w));
  }
  cv_.notify_one();
}

void CompletionThread::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void CompletionThread::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    auto w = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    w->complete();
    w.reset();
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace strata::torch_backend
