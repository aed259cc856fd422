#include "core/comm_impl.hpp"

#include <algorithm>
#include <thread>

#include "core/config.hpp"
#include "base/log.hpp"
#include "collectives/ps_protocol.hpp"
#include "hierarchy/hierarchical.hpp"
#include "strata/errors.hpp"
#include "transport/tags.hpp"

namespace strata::detail {

using transport::Clock;

CommImpl::CommImpl(const Setup& s)
    : rank_(s.rank),
      size_(s.size),
      settings_(check_settings(s.options)),
      kind_(settings_.transport),
      timeout_(settings_.timeout),
      chunk_bytes_(settings_.chunk_bytes),
      send_seq_(static_cast<std::size_t>(std::max(s.size, 0))),
      receive_order_(std::make_shared<ReceiveOrder>(std::max(s.size, 0))) {
  if (size_ < 1) throw InvalidArgument("communicator size " + std::to_string(size_) + " must be at least 1");
  if (rank_ < 0 || rank_ >= size_)
    throw InvalidArgument("rank " + std::to_string(rank_) + " is out of range for size " + std::to_string(size_));
  log::set_rank(rank_);
  default_compression_ = settings_.compression;
  arbiter_ = s.options.arbiter;
  cuda_driver_path_ = config::get(config::cuda_driver);
  nccl_library_path_ = config::get(config::nccl_library);
  bootstrap(s, Clock::now() + timeout_);
  configure_spin();
  engine_ = std::make_shared<Engine>(*transport_, [this](const std::exception_ptr& e) { return failures_.on_error(e); });
  engine_->start();
  if (rank_ == 0 && log::enabled(log::Level::info))
    log::info("communicator of " + std::to_string(size_) + " ranks over " + transport_->name() +
              "; settings:\n" + config::dump());
}

CommImpl::~CommImpl() {
  engine_->stop();  // drains queued work first
  engine_.reset();
  // Goodbye first: it also ends the mesh's calls into this object, which mesh_.reset()
  // could not stop before the pointer is already null.
  mesh_->goodbye();  // so the transport's closing is not taken for a death
  mesh_.reset();
  close_servers();
  transport_.reset();
}

void CommImpl::close_servers() {
  if (servers_ == 0 || transport_->aborted()) return;
  // Servers stop once every worker has said so; one that never hears it is stopped by
  // its launcher, so a bounded wait is enough here.
  static const ps::PushHeader bye;  // op close
  std::vector<transport::RequestPtr> sent;
  for (int j = 0; j < servers_; ++j)
    sent.push_back(transport_->isend(size_ + j, ps::tag(ps::Stream::header), &bye, sizeof bye));
  try {
    if (!transport::wait_all(*transport_, sent, Clock::now() + std::chrono::seconds(5)))
      log::warn("closing: a dedicated server did not take the close message within 5 s");
  } catch (const std::exception& e) {
    log::warn(std::string("closing: could not tell the dedicated servers: ") + e.what());
  }
}

void CommImpl::configure_spin() {
  transport::set_spin(std::chrono::microseconds(config::get(config::spin_us)));
}

const Locality& CommImpl::locality(int r) const {
  if (r < 0 || r >= size_) throw InvalidArgument("locality: rank " + std::to_string(r) + " is out of range");
  return localities_[static_cast<std::size_t>(r)];
}

void CommImpl::abort(const std::string& why) { failures_.abort(why); }

Work CommImpl::collective(const collectives::CollArgs& a, const CallOptions& o, const CallBuffers& where) {
  check_usable();
  const auto timeout = o.timeout.count() > 0 ? o.timeout : timeout_;
  std::lock_guard<std::mutex> lock(issue_mu_);
  const std::uint64_t seq = next_seq_++;
  // Made here, in issue order on the caller's thread: it orders the call on the
  // caller's stream.
  std::shared_ptr<DeviceCall> on_device;
  if (where.where.kind == device::MemoryKind::device) {
    if (through_nccl(a) && where.where.device != device::kEmulatedDevice && !device::nccl_library(nccl_library_path_))
      throw InvalidArgument(std::string(to_string(a.kind)) + " on rank " + std::to_string(rank_) +
                            ": device buffers: the levels inside a region run on NCCL, which is missing: " +
                            device::why_no_nccl());
    on_device = std::make_shared<DeviceCall>(copy_streams(where.where), a, where);
  }
  auto work = engine_->submit([this, seq, a, timeout, on_device, where]() -> std::optional<Pending> {
    check_usable();
    if (!on_device) {
      run_collective(seq, a, timeout);
      return std::nullopt;
    }
    const auto deadline = Clock::now() + timeout;
    const auto wait = [&](device::Marker& m) { wait_for_copy(m, deadline, CallRouter::fingerprint(seq, a).describe()); };
    try {
      if (through_nccl(a)) {
        auto* nccl = nccl_comms(where.where);
        const auto engines = plan_ ? hierarchy::device_engines(*plan_, on_device->copies(), nccl)
                                   : hierarchy::flat_device_engines(on_device->copies(), nccl);
        run_collective(seq, a, timeout, engines.get());
      } else {
        run_collective(seq, on_device->stage_in(wait), timeout);
      }
      on_device->finish(wait);
    } catch (...) {
      // NCCL's kernels may wait for a peer that is gone: stop them, not hang the device.
      if (nccl_) nccl_->abort();
      throw;
    }
    return std::nullopt;
  });
  return Work(work);
}

device::CopyStreams& CommImpl::copy_streams(const device::Placement& where) {
  if (where.device == device::kEmulatedDevice) {
    if (!emulated_copies_) emulated_copies_ = device::host_copy_streams(copy_counters_);
    return *emulated_copies_;
  }
  if (!cuda_copies_) {
    const device::CudaDriver* d = device::driver_in_use(cuda_driver_path_);
    if (!d) throw InvalidArgument("device buffers on rank " + std::to_string(rank_) + ": " + device::why_no_driver());
    cuda_copies_ = device::cuda_copy_streams(*d, copy_counters_);
  }
  return *cuda_copies_;
}

void CommImpl::wait_for_copy(device::Marker& m, Clock::time_point deadline, const std::string& what) {
  while (!m.done()) {
    check_usable();
    if (Clock::now() > deadline)
      throw TimeoutError(what + " on rank " + std::to_string(rank_) + ": a copy between device and host memory "
                         "did not finish before the deadline");
    if (!transport_->progress()) std::this_thread::yield();
  }
}

bool CommImpl::through_nccl(const collectives::CollArgs& a) const {
  if (plan_) return hierarchy::plan_runs_on_device(*plan_, a);
  return size_ > 1 && world_.servers.empty() && hierarchy::flat_runs_on_device(a);
}

hierarchy::NcclComms* CommImpl::nccl_comms(const device::Placement& where) {
  if (where.device == device::kEmulatedDevice) return nullptr;  // the host engine stands in
  if (!nccl_) {
    // Found when the call was issued (CommImpl::collective).
    nccl_ = std::make_unique<hierarchy::NcclComms>(*device::nccl_library(nccl_library_path_));
  }
  return nccl_.get();
}

void CommImpl::run_collective(std::uint64_t seq, const collectives::CollArgs& a, std::chrono::milliseconds timeout,
                              const hierarchy::CallEngines* device) {
  const auto fp = CallRouter::fingerprint(seq, a);
  std::string absent;
  try {
    router_->run(fp, a, Clock::now() + timeout, absent, device);
  } catch (...) {
    std::rethrow_exception(
        failures_.settle(fp.describe() + " on rank " + std::to_string(rank_), seq, std::current_exception(), absent));
  }
}

Compression CommImpl::compression_for(const CallOptions& o) const {
  return o.compression ? *o.compression : default_compression_;
}

void CommImpl::with_feedback(const std::function<void(quant::ErrorFeedback&)>& f) {
  check_usable();
  std::exception_ptr failure;
  auto work = engine_->submit([&]() -> std::optional<Pending> {
    try {
      f(feedback_);
    } catch (...) {
      failure = std::current_exception();  // the caller's error, not the communicator's
    }
    return std::nullopt;
  });
  Work(work).wait();
  if (failure) std::rethrow_exception(failure);
}

Work CommImpl::point_to_point(bool is_send, void* buf, std::size_t count, DataType dt, int peer,
                              const CallOptions& o) {
  check_usable();
  const auto timeout = o.timeout.count() > 0 ? o.timeout : timeout_;
  const std::size_t bytes = count * dtype_size(dt);
  std::lock_guard<std::mutex> lock(issue_mu_);
  const std::uint64_t seq = is_send ? send_seq_[static_cast<std::size_t>(peer)]++ : receive_order_->take(peer);
  auto work = engine_->submit([=, this]() -> std::optional<Pending> {
    check_usable();
    const auto tag = transport::p2p_tag(seq);
    Pending p;
    p.deadline = Clock::now() + timeout;
    p.what = std::string(is_send ? "send #" : "recv #") + std::to_string(seq) +
             (is_send ? " to rank " : " from rank ") + std::to_string(peer) + " on rank " +
             std::to_string(rank_);
    if (is_send) {
      p.request = transport_->isend(peer, tag, buf, bytes);
    } else {
      p.request = transport_->irecv(peer, tag, buf, bytes);
      p.on_complete = [req = p.request, bytes, what = p.what] {
        if (req->bytes() != bytes)
          throw TransportError(what + ": received " + std::to_string(req->bytes()) +
                               " bytes where " + std::to_string(bytes) + " were expected");
      };
    }
    return p;
  });
  return Work(work);
}

Work CommImpl::recv_any(void* buf, std::size_t count, DataType dt, int* user_source, const CallOptions& o) {
  check_usable();
  const auto timeout = o.timeout.count() > 0 ? o.timeout : timeout_;
  const std::size_t bytes = count * dtype_size(dt);
  auto source = std::make_shared<int>(-1);
  std::lock_guard<std::mutex> lock(issue_mu_);
  receive_order_->begin_any();
  std::shared_ptr<transport::Request> req;
  try {
    req = std::make_shared<AnySourceRecv>(*transport_, receive_order_, buf, bytes, source);
  } catch (...) {
    receive_order_->end_any(-1);
    throw;
  }
  auto work = engine_->submit([=, this]() -> std::optional<Pending> {
    check_usable();
    Pending p;
    p.deadline = Clock::now() + timeout;
    p.what = "recv from any source on rank " + std::to_string(rank_);
    p.request = req;
    p.on_complete = [req, bytes, source, user_source, what = p.what] {
      *user_source = *source;
      if (req->bytes() != bytes)
        throw TransportError(what + ": received " + std::to_string(req->bytes()) + " bytes from rank " +
                             std::to_string(*source) + " where " + std::to_string(bytes) + " were expected");
    };
    return p;
  });
  return Work(work);
}

std::string CommImpl::tuning_report() {
  check_usable();
  std::string out;
  auto work = engine_->submit([&]() -> std::optional<Pending> {
    if (tuner_) out = tuner_->report();
    return std::nullopt;
  });
  Work(work).wait();
  return out;
}

}  // namespace strata::detail
