// Host buffers for one collective's tensors. strata moves host memory, so a CUDA tensor
// is copied to pinned host memory on a side stream that first waits for the caller's
// current stream (an event), and copied back on that stream once the collective is
// done. A CPU tensor is used in place when it is contiguous. Only device-generic c10
// calls are used, so this builds and runs where torch has no CUDA.
#pragma once

#include <optional>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

namespace strata::torch_backend {

class Stager {
 public:
  // device: where the call's tensors live (all of them, checked by the backend).
  explicit Stager(c10::Device device);

  // A host tensor holding t's values, for strata to read.
  at::Tensor in(const at::Tensor& t);
  // A host tensor strata writes; finish() copies it into t.
  at::Tensor out(const at::Tensor& t);
  // Both: read, then written back.
  at::Tensor inout(const at::Tensor& t);
  // A fresh host tensor of n elements of dtype for intermediate results (not copied).
  at::Tensor scratch(std::int64_t n, at::ScalarType dtype) const;

  // Blocks until every in() copy has landed in host memory. Call before issuing.
  void ready();
  // Copies every out() back to its tensor and waits for the copies; on the completion
  // thread, after the collective succeeded.
  void finish();

  bool on_device() const { return side_.has_value(); }

 private:
  at::Tensor host_like(const at::Tensor& t) const;

  c10::Device device_;
  std::optional<c10::Stream> side_;  // CUDA (or another device type): the copy stream
  bool pending_in_ = false;
  std::vector<std::pair<at::Tensor, at::Tensor>> outs_;  // (host, destination)
};

}  // namespace strata::torch_backend
