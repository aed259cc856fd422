// Errors inside the plugin are exceptions carrying the NCCL code they should become;
// translate() is the one place where anything thrown turns into an ncclResult_t, and
// guarded() is how every exported entry point calls into the implementation.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

#include "nccl_abi.hpp"

namespace strata::nccl_net {

class NetError : public std::runtime_error {
 public:
  NetError(abi::Result code, const std::string& what) : std::runtime_error(what), code_(code) {}
  abi::Result code() const noexcept { return code_; }

 private:
  abi::Result code_;
};

// NCCL passed something the contract does not allow (bad pointer, unknown device, n > maxRecvs).
[[noreturn]] inline void misuse(const std::string& what) {
  throw NetError(abi::internal_error, what);
}
// The OS or the network failed (errno-style failures, refused connections).
[[noreturn]] inline void system_failure(const std::string& what) {
  throw NetError(abi::system_error, what);
}

// Logs the failure of `call` and returns its code; never throws.
abi::Result translate(const char* call, std::exception_ptr error) noexcept;

template <class F>
abi::Result guarded(const char* call, F&& body) noexcept {
  try {
    body();
    return abi::success;
  } catch (...) {
    return translate(call, std::current_exception());
  }
}

}  // namespace strata::nccl_net
