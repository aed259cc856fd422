// The C ABI's machinery behind include/strata/strata.h: handle tables, per-communicator
// error state, request state, and guarded(), through which every entry point runs (see
// c_api.cpp). Internal to capi/.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/communicator.hpp"
#include "strata/errors.hpp"
#include "strata/server.hpp"
#include "strata/strata.h"

namespace strata::capi {

// Defined in c_api_errors.cpp.
void assign_message(std::string& into, const char* fn, const char* what) noexcept;
strataResult_t translate(const std::exception_ptr& e, const char** what) noexcept;
void set_thread_error(const char* fn, const char* what) noexcept;
void clear_thread_error() noexcept;
const char* thread_error() noexcept;
const char* copy_for_caller(const std::string& message) noexcept;
// Argument checks, each throwing InvalidArgument that names the C argument.
[[noreturn]] void invalid(const std::string& what);
void require_out(const void* p, const char* name);
void require_buffer(const void* p, std::size_t count, const char* name);
DataType to_cpp(strataDataType_t t);
ReduceOp to_cpp(strataRedOp_t op);
CommOptions options_from(const strataConfig_t* config);

class CommState;

// One issued non-blocking operation. Exactly one thread at a time calls into work_
// (the one that set observing_), so the C layer never relies on Work being shareable;
// others wait on cv_ for the outcome it caches.
class RequestState {
 public:
  RequestState(Work w, const char* op, std::weak_ptr<CommState> comm)
      : work_(std::move(w)), op_(op), comm_(std::move(comm)) {}

  // Never blocks for long: true once the outcome is known.
  bool poll() {
    std::unique_lock<std::mutex> lock(mu_);
    if (finished_) return true;
    if (observing_ || !work_.test()) return false;
    finish(lock);
    return true;
  }

  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!finished_) {
      if (observing_)
        cv_.wait(lock);
      else
        finish(lock);
    }
  }

  // Precondition: finished.
  void rethrow() {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void finish(std::unique_lock<std::mutex>& lock);

  Work work_;
  const char* op_;  // the issuing entry point's name, for messages
  std::weak_ptr<CommState> comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool observing_ = false;
  bool finished_ = false;
  std::exception_ptr error_;
};

class CommState {
 public:
  explicit CommState(Communicator c) : comm_(std::move(c)) {}

  Communicator& comm() { return comm_; }
  // What every call on this communicator runs with: the stream of strataCommSetStream.
  CallOptions call_options() const {
    CallOptions o;
    o.stream = stream_.load(std::memory_order_relaxed);
    return o;
  }
  void set_stream(void* s) { stream_.store(s, std::memory_order_relaxed); }

  void record(strataResult_t r, const char* fn, const char* what) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    assign_message(last_error_, fn, what);
    // Argument errors are caught before anything is sent and leave the comm usable.
    if (r != strataInvalidArgument && r != strataSuccess && r != strataInProgress &&
        async_error_ == strataSuccess)
      async_error_ = r;
  }

  // An operation issued on this communicator succeeded: the message of an earlier
  // failure no longer describes where the communicator stands.
  void clear_error() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_.clear();
  }

  const char* last_error_copy() const noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    return copy_for_caller(last_error_);
  }

  strataResult_t async_error() const noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    return async_error_;
  }

  // Kept until observed finished, so that failures of freed requests still reach the
  // async error and strataCommDestroy can wait for them. Finished entries are dropped
  // whenever the list has doubled, which keeps issuing amortized O(1).
  void track(std::shared_ptr<RequestState> r) {
    bool prune = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      outstanding_.push_back(std::move(r));
      prune = outstanding_.size() >= prune_at_;
    }
    if (prune) {
      poll_outstanding();
      std::lock_guard<std::mutex> lock(mu_);
      prune_at_ = std::max<std::size_t>(64, 2 * outstanding_.size());
    }
  }

  // Observes every tracked request without blocking; true if any is still running.
  bool poll_outstanding() { return sweep([](RequestState& r) { return r.poll(); }); }

  void drain() {
    sweep([](RequestState& r) {
      r.wait();
      return true;
    });
  }

 private:
  // Requests are observed with mu_ released: finishing one records into this object.
  template <class Observe>
  bool sweep(Observe observe) {
    std::vector<std::shared_ptr<RequestState>> snapshot;
    {
      std::lock_guard<std::mutex> lock(mu_);
      snapshot = outstanding_;
    }
    std::vector<RequestState*> done;
    for (auto& r : snapshot)
      if (observe(*r)) done.push_back(r.get());
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(outstanding_, [&](const std::shared_ptr<RequestState>& r) {
      return std::find(done.begin(), done.end(), r.get()) != done.end();
    });
    return done.size() < snapshot.size();
  }

  Communicator comm_;
  std::atomic<void*> stream_{nullptr};
  mutable std::mutex mu_;
  std::string last_error_;
  strataResult_t async_error_ = strataSuccess;
  std::vector<std::shared_ptr<RequestState>> outstanding_;
  std::size_t prune_at_ = 64;
};

class Registry {
 public:
  strataComm_t add(std::shared_ptr<CommState> c) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    const std::uint64_t id = next_++;
    comms_.emplace(id, std::move(c));
    return reinterpret_cast<strataComm_t>(static_cast<std::uintptr_t>(id));
  }
  strataRequest_t add(std::shared_ptr<RequestState> r) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    const std::uint64_t id = next_++;
    requests_.emplace(id, std::move(r));
    return reinterpret_cast<strataRequest_t>(static_cast<std::uintptr_t>(id));
  }
  std::shared_ptr<CommState> find(strataComm_t h) const { return find_in(comms_, h); }
  std::shared_ptr<RequestState> find(strataRequest_t h) const { return find_in(requests_, h); }
  std::shared_ptr<CommState> take(strataComm_t h) { return take_from(comms_, h); }
  std::shared_ptr<RequestState> take(strataRequest_t h) { return take_from(requests_, h); }

 private:
  template <class Map, class H>
  typename Map::mapped_type find_in(const Map& m, H h) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = m.find(reinterpret_cast<std::uintptr_t>(h));
    return it == m.end() ? nullptr : it->second;
  }
  template <class Map, class H>
  typename Map::mapped_type take_from(Map& m, H h) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = m.find(reinterpret_cast<std::uintptr_t>(h));
    if (it == m.end()) return nullptr;
    auto v = std::move(it->second);
    m.erase(it);
    return v;
  }

  mutable std::shared_mutex mu_;
  // One counter for both kinds, so a request handle passed as a comm is never found.
  std::uint64_t next_ = 1;
  std::unordered_map<std::uint64_t, std::shared_ptr<CommState>> comms_;
  std::unordered_map<std::uint64_t, std::shared_ptr<RequestState>> requests_;
};

// Deliberately leaked: a communicator the program never destroyed must not be torn down
// by static destructors at exit, where its peers may already be gone.
Registry& registry();

// What an entry point is working on, so that a failure is recorded on its communicator.
class Call {
 public:
  explicit Call(const char* fn) noexcept : fn_(fn) {}

  std::shared_ptr<CommState> comm(strataComm_t h) {
    if (h == nullptr) invalid("comm is NULL");
    auto c = registry().find(h);
    if (!c) invalid("comm is not a live communicator (destroyed, aborted or never created)");
    bound_ = c;
    return c;
  }

  static std::shared_ptr<RequestState> request(strataRequest_t h) {
    if (h == nullptr) invalid("req is NULL");
    auto r = registry().find(h);
    if (!r) invalid("req is not a live request (freed or never issued)");
    return r;
  }

  strataResult_t fail(const std::exception_ptr& e) noexcept {
    const char* what = nullptr;
    const strataResult_t r = translate(e, &what);
    set_thread_error(fn_, what);
    if (bound_) bound_->record(r, fn_, what);
    return r;
  }

 private:
  const char* fn_;
  std::shared_ptr<CommState> bound_;
};

// The calling thread's message describes its latest call: cleared by one that did not fail.
template <class Body>
strataResult_t guarded(const char* fn, Body&& body) noexcept {
  Call call(fn);
  try {
    const strataResult_t r = body(call);
    if (r == strataSuccess || r == strataInProgress) clear_thread_error();
    return r;
  } catch (...) {
    return call.fail(std::current_exception());
  }
}

// Shared by every operation: start() validates and issues on the communicator.
template <class Start>
strataResult_t issue(const char* fn, strataComm_t comm, strataRequest_t* req,
                     Start&& start) noexcept {
  return guarded(fn, [&](Call& call) {
    if (req != nullptr) *req = nullptr;
    auto state = call.comm(comm);
    Work w = start(state->comm(), state->call_options());
    if (req == nullptr) {
      w.wait();
      state->clear_error();
      return strataSuccess;
    }
    auto r = std::make_shared<RequestState>(std::move(w), fn, state);
    state->track(r);
    *req = registry().add(std::move(r));
    state->clear_error();
    return strataSuccess;
  });
}

// strataCommInitRank and strataCommInitRankConfig.
strataResult_t init_rank(const char* fn, strataComm_t* comm, int nranks, const strataUniqueId& id,
                         int rank, const strataConfig_t* config) noexcept;

}  // namespace strata::capi

// The entry points are extern "C" functions at global scope, in the two files that
// include this header (c_api.cpp, c_api_ops.cpp); they name these unqualified.
using strata::capi::Call;
using strata::capi::guarded;
using strata::capi::invalid;
using strata::capi::issue;
using strata::capi::registry;
using strata::capi::require_buffer;
using strata::capi::require_out;
using strata::capi::to_cpp;
