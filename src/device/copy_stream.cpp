#include "device/copy_stream.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "strata/errors.hpp"

namespace strata::device {

namespace {

CuDevicePtr dptr(const void* p) { return static_cast<CuDevicePtr>(reinterpret_cast<std::uintptr_t>(p)); }

// ---- CUDA -------------------------------------------------------------------------

// What the calls on one context share. The copies of every call go on one stream of its
// own (never the caller's: the caller's stream waits for the call to end, which its own
// copies could then never do). The callers' streams wait for `flag` to reach their
// call's number; calls end in issue order (core/engine.hpp), so the numbers rise in order.
struct CudaLane {
  CuContext context = nullptr;
  CuStream stream = nullptr;
  std::uint32_t* flag = nullptr;  // mapped page-locked memory, written by the device or the host
  CuDevicePtr flag_dev = 0;
  std::uint32_t issued = 0;       // the last call number handed out, under mu
  std::mutex mu;
  void* staging[CopyStream::kStagingSlots] = {};
  std::size_t staging_bytes[CopyStream::kStagingSlots] = {};
  CuDevicePtr scratch = 0;
  std::size_t scratch_bytes = 0;
};

// The buffers' context current for a while on the caller's thread, which gets its own back.
class InContext {
 public:
  InContext(const CudaDriver& d, CuContext c) : d_(d) {
    d_.ctx_get_current(&before_);
    d_.check(d_.ctx_set_current(c), "cuCtxSetCurrent", "the buffers' context");
  }
  ~InContext() { d_.ctx_set_current(before_); }
  InContext(const InContext&) = delete;
  InContext& operator=(const InContext&) = delete;

 private:
  const CudaDriver& d_;
  CuContext before_ = nullptr;
};

class CudaMarker final : public Marker {
 public:
  CudaMarker(const CudaDriver& d, CuEvent e) : d_(d), event_(e) {}
  ~CudaMarker() override { d_.event_destroy(event_); }
  bool done() override {
    const CuResult r = d_.event_query(event_);
    if (r == kCudaNotReady) return false;
    d_.check(r, "cuEventQuery", "a device copy of the collective");
    return true;
  }

 private:
  const CudaDriver& d_;
  CuEvent event_;
};

class CudaCall final : public CopyStream {
 public:
  CudaCall(const CudaDriver& d, CudaLane& lane, CuStream caller, CopyCounters& counters)
      : d_(d), lane_(lane), caller_(caller), counters_(counters) {}
  ~CudaCall() override {
    if (held_ && !released_) release_caller(true);
    if (issued_) d_.event_destroy(issued_);
  }

  void to_host(void* host, const void* dev, std::size_t bytes) override {
    if (!bytes) return;
    enter();
    d_.check(d_.memcpy_dtoh_async(host, dptr(dev), bytes, lane_.stream), "cuMemcpyDtoHAsync", "staging to the host");
    counters_.to_host += bytes;
  }
  void to_device(void* dev, const void* host, std::size_t bytes) override {
    if (!bytes) return;
    enter();
    d_.check(d_.memcpy_htod_async(dptr(dev), host, bytes, lane_.stream), "cuMemcpyHtoDAsync", "staging to the device");
    counters_.to_device += bytes;
  }
  void within_device(void* dst, const void* src, std::size_t bytes) override {
    if (!bytes) return;
    enter();
    d_.check(d_.memcpy_dtod_async(dptr(dst), dptr(src), bytes, lane_.stream), "cuMemcpyDtoDAsync",
             "a copy within device memory");
  }
  CuStream device_stream() override {
    enter();
    return lane_.stream;
  }
  std::shared_ptr<Marker> mark() override {
    enter();
    CuEvent e = nullptr;
    d_.check(d_.event_create(&e, kEventDisableTiming), "cuEventCreate", "a copy marker");
    auto m = std::make_shared<CudaMarker>(d_, e);
    d_.check(d_.event_record(e, lane_.stream), "cuEventRecord", "a copy marker");
    return m;
  }
  void* staging(int slot, std::size_t bytes) override {
    const auto i = static_cast<std::size_t>(slot);
    if (lane_.staging_bytes[i] < bytes) {
      enter();
      const std::size_t grown = std::max(bytes, lane_.staging_bytes[i] * 2);
      if (lane_.staging[i]) d_.mem_free_host(lane_.staging[i]);
      lane_.staging[i] = nullptr;
      lane_.staging_bytes[i] = 0;
      d_.check(d_.mem_host_alloc(&lane_.staging[i], grown, kHostAllocPortable), "cuMemHostAlloc",
               "staging memory of " + std::to_string(grown) + " bytes");
      lane_.staging_bytes[i] = grown;
    }
    return lane_.staging[i];
  }
  void* device_scratch(std::size_t bytes) override {
    if (lane_.scratch_bytes < bytes) {
      enter();
      const std::size_t grown = std::max(bytes, lane_.scratch_bytes * 2);
      // Earlier calls are done with it: a call ends only when its device work did.
      if (lane_.scratch) d_.mem_free(lane_.scratch);
      lane_.scratch = 0;
      lane_.scratch_bytes = 0;
      d_.check(d_.mem_alloc(&lane_.scratch, grown), "cuMemAlloc", "device scratch of " + std::to_string(grown) + " bytes");
      lane_.scratch_bytes = grown;
    }
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(lane_.scratch));
  }
  void hold_caller() override {
    const InContext in(d_, lane_.context);  // on the caller's thread, whose context stays its own
    d_.check(d_.event_create(&issued_, kEventDisableTiming), "cuEventCreate", "the call's start");
    d_.check(d_.event_record(issued_, caller_), "cuEventRecord", "the call's start on the caller's stream");
    {
      std::lock_guard lk(lane_.mu);
      number_ = ++lane_.issued;
    }
    d_.check(d_.stream_wait_value32(caller_, lane_.flag_dev, number_, kStreamWaitValueGeq), "cuStreamWaitValue32",
             "holding the caller's stream until the call ends");
    held_ = true;
  }
  void release_caller(bool failed) override {
    if (!held_ || released_) return;
    released_ = true;
    if (!failed &&
        d_.stream_write_value32(lane_.stream, lane_.flag_dev, number_, 0) == kCudaSuccess)
      return;
    // From the host: the caller's stream goes on (over results that are not there; the
    // Work carries the error).
    __atomic_store_n(lane_.flag, number_, __ATOMIC_RELEASE);
  }

 private:
  // The engine thread's first device call of this call: the context current, and the
  // copy stream after what the caller enqueued before the call.
  void enter() {
    if (entered_) return;
    d_.check(d_.ctx_set_current(lane_.context), "cuCtxSetCurrent", "the buffers' context");
    if (issued_) d_.check(d_.stream_wait_event(lane_.stream, issued_, 0), "cuStreamWaitEvent", "the call's start");
    entered_ = true;
  }

  const CudaDriver& d_;
  CudaLane& lane_;
  CuStream caller_;
  CopyCounters& counters_;
  CuEvent issued_ = nullptr;
  std::uint32_t number_ = 0;
  bool held_ = false, released_ = false, entered_ = false;
};

class CudaStreams final : public CopyStreams {
 public:
  CudaStreams(const CudaDriver& d, CopyCounters& counters) : d_(d), counters_(counters) {}
  // Lanes stay: a caller's stream may still wait on their flag after the communicator
  // is gone, and the streams and staging are few.
  ~CudaStreams() override { (void)lanes_.release(); }

  std::unique_ptr<CopyStream> open(const Placement& where, CuStream stream) override {
    return std::make_unique<CudaCall>(d_, lane(where.context), stream, counters_);
  }

 private:
  CudaLane& lane(CuContext c) {
    std::lock_guard lk(mu_);
    auto& l = (*lanes_)[c];
    if (l) return *l;
    auto n = std::make_unique<CudaLane>();
    n->context = c;
    const InContext in(d_, c);  // made at issue, on the caller's thread
    d_.check(d_.stream_create(&n->stream, kStreamNonBlocking), "cuStreamCreate", "the copy stream");
    void* flag = nullptr;
    d_.check(d_.mem_host_alloc(&flag, sizeof(std::uint32_t), kHostAllocPortable | kHostAllocDeviceMap),
             "cuMemHostAlloc", "the stream flag");
    n->flag = static_cast<std::uint32_t*>(flag);
    *n->flag = 0;
    d_.check(d_.mem_host_get_device_pointer(&n->flag_dev, flag, 0), "cuMemHostGetDevicePointer", "the stream flag");
    l = std::move(n);
    return *l;
  }

  const CudaDriver& d_;
  CopyCounters& counters_;
  std::mutex mu_;
  std::unique_ptr<std::map<CuContext, std::unique_ptr<CudaLane>>> lanes_ =
      std::make_unique<std::map<CuContext, std::unique_ptr<CudaLane>>>();
};

// ---- emulation --------------------------------------------------------------------

// A copy engine of its own: tasks run in order on one thread, like a stream's.
class HostEngine {
 public:
  HostEngine() : thread_([this] { loop(); }) {}
  ~HostEngine() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  std::uint64_t enqueue(std::function<void()> task) {
    std::lock_guard lk(mu_);
    tasks_.push_back(std::move(task));
    cv_.notify_all();
    return ++enqueued_;
  }
  bool reached(std::uint64_t n) {
    std::lock_guard lk(mu_);
    return done_ >= n;
  }
  std::uint64_t enqueued() {
    std::lock_guard lk(mu_);
    return enqueued_;
  }

 private:
  void loop() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      auto t = std::move(tasks_.front());
      tasks_.pop_front();
      lk.unlock();
      t();
      lk.lock();
      ++done_;
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::uint64_t enqueued_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

class HostMarker final : public Marker {
 public:
  HostMarker(std::shared_ptr<HostEngine> e, std::uint64_t n) : engine_(std::move(e)), n_(n) {}
  bool done() override { return engine_->reached(n_); }

 private:
  std::shared_ptr<HostEngine> engine_;
  std::uint64_t n_;
};

class HostCall final : public CopyStream {
 public:
  HostCall(std::shared_ptr<HostEngine> e, std::vector<char>* staging, std::vector<char>* scratch,
           CopyCounters& counters)
      : engine_(std::move(e)), staging_(staging), scratch_(scratch), counters_(counters) {}
  void to_host(void* host, const void* dev, std::size_t bytes) override {
    copy(host, dev, bytes);
    counters_.to_host += bytes;
  }
  void to_device(void* dev, const void* host, std::size_t bytes) override {
    copy(dev, host, bytes);
    counters_.to_device += bytes;
  }
  void within_device(void* dst, const void* src, std::size_t bytes) override { copy(dst, src, bytes); }
  std::shared_ptr<Marker> mark() override { return std::make_shared<HostMarker>(engine_, engine_->enqueued()); }
  CuStream device_stream() override { return nullptr; }
  void* staging(int slot, std::size_t bytes) override {
    auto& s = staging_[static_cast<std::size_t>(slot)];
    if (s.size() < bytes) s.resize(std::max(bytes, s.size() * 2));
    return s.data();
  }
  void* device_scratch(std::size_t bytes) override {
    if (scratch_->size() < bytes) scratch_->resize(std::max(bytes, scratch_->size() * 2));
    return scratch_->data();
  }
  void hold_caller() override {}
  void release_caller(bool) override {}

 private:
  void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes) engine_->enqueue([=] { std::memcpy(dst, src, bytes); });
  }
  std::shared_ptr<HostEngine> engine_;
  std::vector<char>* staging_;
  std::vector<char>* scratch_;
  CopyCounters& counters_;
};

class HostStreams final : public CopyStreams {
 public:
  explicit HostStreams(CopyCounters& counters) : counters_(counters) {}
  std::unique_ptr<CopyStream> open(const Placement&, CuStream) override {
    return std::make_unique<HostCall>(engine_, staging_, &scratch_, counters_);
  }

 private:
  CopyCounters& counters_;
  std::shared_ptr<HostEngine> engine_ = std::make_shared<HostEngine>();
  std::vector<char> staging_[CopyStream::kStagingSlots];
  std::vector<char> scratch_;
};

}  // namespace

std::unique_ptr<CopyStreams> cuda_copy_streams(const CudaDriver& d, CopyCounters& counters) {
  return std::make_unique<CudaStreams>(d, counters);
}
std::unique_ptr<CopyStreams> host_copy_streams(CopyCounters& counters) {
  return std::make_unique<HostStreams>(counters);
}

}  // namespace strata::device
