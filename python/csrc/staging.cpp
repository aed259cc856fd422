#include "staging.hpp"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace strata::torch_backend {

Stager::Stager(c10::Device device) : device_(device) {
  if (device.is_cpu()) return;
  const c10::impl::VirtualGuardImpl impl(device.type());
  side_ = impl.getStreamFromGlobalPool(device, /*isHighPriority=*/false);
  // Whatever the caller queued before this call (the kernels producing a gradient, a
  // zeroing of an output) happens before our copies.
  c10::Event produced(device.type());
  produced.record(impl.getStream(device));
  produced.block(*side_);
}

at::Tensor Stager::host_like(const at::Tensor& t) const {
  return at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(on_device()));
}

at::Tensor Stager::scratch(std::int64_t n, at::ScalarType dtype) const {
  return at::empty({n}, at::TensorOptions().dtype(dtype).pinned_memory(on_device()));
}

at::Tensor Stager::in(const at::Tensor& t) {
  if (!on_device()) return t.is_contiguous() ? t : t.contiguous();
  at::Tensor host = host_like(t);
  const c10::StreamGuard guard(*side_);
  host.copy_(t, /*non_blocking=*/true);
  pending_in_ = true;
  return host;
}

at::Tensor Stager::out(const at::Tensor& t) {
  if (!on_device() && t.is_contiguous()) return t;
  at::Tensor host = host_like(t);
  outs_.emplace_back(host, t);
  return host;
}

at::Tensor Stager::inout(const at::Tensor& t) {
  if (!on_device() && t.is_contiguous()) return t;
  at::Tensor host = in(t);
  outs_.emplace_back(host, t);
  return host;
}

void Stager::ready() {
  if (pending_in_) side_->synchronize();
  pending_in_ = false;
}

void Stager::finish() {
  if (outs_.empty()) return;
  if (!on_device()) {
    for (auto& [host, dst] : outs_) dst.copy_(host);
    return;
  }
  {
    const c10::StreamGuard guard(*side_);
    for (auto& [host, dst] : outs_) dst.copy_(host, /*non_blocking=*/true);
  }
  side_->synchronize();
}

}  // namespace strata::torch_backend
