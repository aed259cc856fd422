#include "staging.hpp"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace strata::torch_backend {

Stager::Stager(c10::Device device, bool device_ok) : device_(device) {
  if (device.is_cpu()) return;
  const c10::impl::VirtualGuardImpl impl(device.type());
  if (device_ok && device.is_cuda()) {
    direct_ = true;
    caller_ = impl.getStream(device);
    return;
  }
  side_ = impl.getStreamFromGlobalPool(device, /*isHighPriority=*/false);
  // Whatever the caller queued before this call (the kernels producing a gradient, a
  // zeroing of an output) happens before our copies.
  c10::Event produced(device.type());
  produced.record(impl.getStream(device));
  produced.block(*side_);
}

CallOptions Stager::options(std::chrono::milliseconds timeout) const {
  CallOptions o;
  if (timeout != std::chrono::milliseconds(-1)) o.timeout = timeout;  // c10d::kUnsetTimeout: the communicator's
  if (caller_) o.stream = caller_->native_handle();
  return o;
}

at::Tensor Stager::host_like(const at::Tensor& t) const {
  return at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(staged()));
}

at::Tensor Stager::scratch(std::int64_t n, at::ScalarType dtype) const {
  if (direct_) return at::empty({n}, at::TensorOptions().dtype(dtype).device(device_));
  return at::empty({n}, at::TensorOptions().dtype(dtype).pinned_memory(staged()));
}

at::Tensor Stager::in(const at::Tensor& t) {
  // Direct: a gather into a contiguous copy is queued on the caller's stream, before the
  // call, which strata orders after that stream's work.
  if (!staged()) return t.is_contiguous() ? t : t.contiguous();
  at::Tensor host = host_like(t);
  const c10::StreamGuard guard(*side_);
  host.copy_(t, /*non_blocking=*/true);
  pending_in_ = true;
  return host;
}

at::Tensor Stager::out(const at::Tensor& t) {
  if (!staged() && t.is_contiguous()) return t;
  at::Tensor mine = direct_ ? at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous))
                            : host_like(t);
  outs_.emplace_back(mine, t);
  return mine;
}

at::Tensor Stager::inout(const at::Tensor& t) {
  if (!staged() && t.is_contiguous()) return t;
  at::Tensor mine = in(t);
  outs_.emplace_back(mine, t);
  return mine;
}

void Stager::ready() {
  if (pending_in_) side_->synchronize();
  pending_in_ = false;
}

void Stager::finish(const std::function<void()>& unpack) {
  if (!staged() && !direct_) {  // CPU
    if (unpack) unpack();
    for (auto& [mine, dst] : outs_) dst.copy_(mine);
    return;
  }
  if (!unpack && outs_.empty()) return;
  // The caller's stream already waits for the collective (strata holds it until the
  // call's end); what follows is queued behind it, and waited for here so that the torch
  // Work completes with its outputs in place.
  const c10::Stream order = direct_ ? *caller_ : *side_;
  {
    const c10::StreamGuard guard(order);
    if (unpack) unpack();
    for (auto& [mine, dst] : outs_) dst.copy_(mine, /*non_blocking=*/true);
  }
  c10::Event done(device_.type());
  done.record(order);
  done.synchronize();
}

}  // namespace strata::torch_backend
