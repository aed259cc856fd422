#include "device/shared_library.hpp"

#include <dlfcn.h>

namespace strata::device {

SharedLibrary::SharedLibrary(const std::vector<std::string>& names) {
  for (const auto& n : names) {
    // RTLD_LOCAL: the library's symbols do not leak into later lookups of other libraries,
    // and a process that already loaded it (torch loads NCCL) gets that copy back.
    handle_ = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
      name_ = n;
      why_.clear();
      return;
    }
    const char* e = ::dlerror();
    why_ += (why_.empty() ? "" : "; ") + (e ? std::string(e) : n + ": not found");
  }
}

SharedLibrary::~SharedLibrary() {
  // Left loaded: CUDA and NCCL keep threads and state that outlive the last caller.
}

void* SharedLibrary::find(const char* symbol) {
  if (!handle_) return nullptr;
  ::dlerror();
  void* p = ::dlsym(handle_, symbol);
  if (!p) why_ += (why_.empty() ? "" : "; ") + name_ + " has no " + symbol;
  return p;
}

}  // namespace strata::device
