// A shared library opened at run time (dlopen) and the entry points taken from it. The
// GPU path finds CUDA's driver and NCCL this way, so libstrata loads and runs where
// neither is installed; what could not be opened is kept as a sentence for the error a
// device buffer then gets.
#pragma once

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

}  // namespace strata::device
