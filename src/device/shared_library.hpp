// A shared library opened at run time (dlopen) and the entry points taken from it. The
// GPU path finds CUDA's driver and NCCL this way, so libstrata loads and runs where
// neither is installed; what could not be opened is kept as a sentence for the error a
// device buffer then gets.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace strata::device {

class SharedLibrary {
 public:
  // Tries `names` in order (sonames such as "libnccl.so.2", or paths); on failure the
  // library is closed and why() says what each attempt met.
  explicit SharedLibrary(const std::vector<std::string>& names);
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary();

  bool open() const { return handle_ != nullptr; }
  const std::string& name() const { return name_; }  // the one opened
  const std::string& why() const { return why_; }
  // Fills `fn` with the symbol; false (and why() extended) when it is missing.
  template <class Fn>
  bool take(Fn*& fn, const char* symbol) {
    fn = reinterpret_cast<Fn*>(find(symbol));
    return fn != nullptr;
  }

 private:
  void* find(const char* symbol);
  void* handle_ = nullptr;
  std::string name_;
  std::string why_;
};

// A library's table of entry points as opening it gave it: `api` where ok, else why not.
template <class Api>
struct Opened {
  Api api{};
  bool ok = false;
  std::string why;
};

// The process's one opening of a library: the first get() opens it (with the loader it
// is handed), every later one returns that outcome. Kept for the process's life: CUDA and
// NCCL keep threads and state that outlive the last caller.
template <class Api>
class OpenOnce {
 public:
  template <class Load>
  const Opened<Api>& get(Load&& load) {
    std::call_once(once_, [&] {
      opened_ = new Opened<Api>(load());
      done_.store(true, std::memory_order_release);
    });
    return *opened_;
  }
  // Whether get() has run, without running it.
  bool done() const { return done_.load(std::memory_order_acquire); }

 private:
  std::once_flag once_;
  Opened<Api>* opened_ = nullptr;
  std::atomic<bool> done_{false};
};

}  // namespace strata::device
