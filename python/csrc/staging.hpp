// The memory one collective's tensors are handed to strata in. A CUDA tensor goes as it
// is (direct): strata takes device pointers, ordered on the caller's current stream, and
// runs the levels inside a region on NCCL, copying only the shard it sends across regions
// to the host. What strata takes on host memory only (send, recv) stages a CUDA tensor
// through pinned host memory instead, on a side stream that first waits for the caller's
// current stream. A CPU tensor is used in place when it is contiguous. Only
// device-generic c10 calls are used, so this builds and runs where torch has no CUDA.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

#include "strata/options.hpp"

namespace strata::torch_backend {

class Stager {
 public:
  // device: where the call's tensors live (all of them, checked by the backend);
  // device_ok: strata takes this call on device memory.
  Stager(c10::Device device, bool device_ok);

  // A tensor holding t's values, for strata to read.
  at::Tensor in(const at::Tensor& t);
  // A tensor strata writes; finish() copies it into t where it is not t.
  at::Tensor out(const at::Tensor& t);
  // Both: read, then written back.
  at::Tensor inout(const at::Tensor& t);
  // A fresh tensor of n elements of dtype for intermediate results (not copied), where
  // strata takes the call's other tensors.
  at::Tensor scratch(std::int64_t n, at::ScalarType dtype) const;

  // The call's options: on device memory, ordered on the caller's stream.
  CallOptions options(std::chrono::milliseconds timeout) const;
  // Blocks until every in() copy has landed in host memory. Call before issuing.
  void ready();
  // On the completion thread, after the collective succeeded: runs `unpack` (host-side
  // rearranging of a result, may be empty), then copies every out() back to its tensor,
  // in the caller's stream order, and waits for it.
  void finish(const std::function<void()>& unpack);

 private:
  bool staged() const { return side_.has_value(); }
  at::Tensor host_like(const at::Tensor& t) const;

  c10::Device device_;
  bool direct_ = false;                // CUDA tensors handed to strata as they are
  std::optional<c10::Stream> caller_;  // direct: the stream current when the call was made
  std::optional<c10::Stream> side_;    // staged: the copy stream
  bool pending_in_ = false;
  std::vector<std::pair<at::Tensor, at::Tensor>> outs_;  // (what strata wrote, destination)
};

}  // namespace strata::torch_backend
