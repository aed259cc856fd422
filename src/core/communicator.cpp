// Public Communicator: argument checks (before anything is queued), then CommImpl.
#include "strata/communicator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <limits>

#include "base/log.hpp"
#include "collectives/registry.hpp"
#include "core/comm_impl.hpp"
#include "core/device_call.hpp"
#include "device/memory.hpp"
#include "core/launch_env.hpp"
#include "core/unique_id.hpp"
#include "quant/compression.hpp"
#include "strata/errors.hpp"
#include "topology/algorithm_rules.hpp"

namespace strata {

using detail::CommImpl;

namespace {

// What an algorithm named for a call runs over: the ranks and any dedicated servers.
collectives::GroupShape shape_of(const CommImpl& c) { return c.world().shape(); }

struct Checker {
  const char* collective;
  int rank;
  const CommImpl* impl = nullptr;

  [[noreturn]] void fail(const std::string& msg) const {
    throw InvalidArgument(std::string(collective) + " on rank " + std::to_string(rank) + ": " + msg);
  }
  void dtype(DataType dt) const {
    if (static_cast<unsigned>(dt) >= kNumDataTypes)
      fail("dtype " + std::to_string(static_cast<int>(dt)) + " is not a DataType");
  }
  void op(ReduceOp op, DataType dt) const {
    if (static_cast<unsigned>(op) >= kNumReduceOps)
      fail("op " + std::to_string(static_cast<int>(op)) + " is not a ReduceOp");
    if (op == ReduceOp::avg && !is_floating(dt))
      fail(std::string("op avg needs a floating dtype, got ") + to_string(dt));
  }
  // No object is larger than PTRDIFF_MAX bytes, so a larger size cannot describe a
  // buffer; refusing it also keeps every later `pointer + bytes` from wrapping.
  std::size_t bytes(std::size_t count, DataType dt, std::size_t blocks = 1) const {
    const std::size_t esz = dtype_size(dt);
    constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
    if (count > kMax / esz / blocks)
      fail("count " + std::to_string(count) + (blocks > 1 ? " x " + std::to_string(blocks) + " ranks" : "") +
           " of " + std::to_string(esz) + "-byte elements is larger than any buffer can be");
    return count * esz * blocks;
  }
  void buffer(const void* p, std::size_t bytes, const char* name, DataType dt = DataType::u8) const {
    if (!p && bytes) fail(std::string(name) + " is null but count is non-zero");
    if (p && bytes > std::numeric_limits<std::uintptr_t>::max() - reinterpret_cast<std::uintptr_t>(p))
      fail(std::string(name) + " with " + std::to_string(bytes) + " bytes runs past the end of the address space");
    // The reduction kernels read whole elements; refuse here rather than mid-collective.
    if (reinterpret_cast<std::uintptr_t>(p) % dtype_size(dt) != 0)
      fail(std::string(name) + " is not aligned to its " + std::to_string(dtype_size(dt)) +
           "-byte elements");
  }
  // Where the call's buffers are: all host memory, or all memory of one device. sb and
  // rb: what the call reads from send and writes to recv (0 for one it leaves alone).
  detail::CallBuffers placed(const CallOptions& o, const void* send, std::size_t sb, const void* recv,
                             std::size_t rb) const {
    const std::string& path = impl->cuda_driver_path();
    const auto ps = sb ? device::placement_of(send, path) : device::Placement{};
    const auto pr = rb ? device::placement_of(recv, path) : device::Placement{};
    auto where = [](const device::Placement& p) {
      return p.kind == device::MemoryKind::host ? std::string("host memory")
             : p.device == device::kEmulatedDevice ? std::string("emulated device memory")
                                                   : "memory of CUDA device " + std::to_string(p.device);
    };
    if (sb && rb && (ps.kind != pr.kind || ps.device != pr.device))
      fail("send is " + where(ps) + " but recv is " + where(pr) +
           ": one call's buffers must all be host memory or all memory of one device");
    return detail::CallBuffers{sb ? ps : pr, sb, rb, o.stream};
  }
  // Point to point runs on host memory only, so far.
  void host_only(const CallOptions& o, const void* buf, std::size_t bytes) const {
    if (placed(o, buf, bytes, nullptr, 0).where.kind != device::MemoryKind::host)
      fail("buf is device memory; send and recv take host memory only (collectives take either)");
  }
  // CallOptions::algorithm: rules of the override grammar (topology/algorithm_rules.hpp),
  // a registered name being the simplest; the one matching this call must implement it.
  const collectives::Algorithm* algorithm(const CallOptions& o, CollectiveKind kind, DataType dt,
                                          std::size_t count, collectives::GroupShape shape) const {
    try {
      return topology::resolve_call_algorithm(o.algorithm, kind, dt, count, shape);
    } catch (const InvalidArgument& e) {
      fail(e.what());
    }
  }
  void rank_arg(int r, int size, const char* name) const {
    if (r < 0 || r >= size)
      fail(std::string(name) + " " + std::to_string(r) + " is out of range for " +
           std::to_string(size) + " ranks");
  }
  // send/recv may be identical (in place, at in_place_offset into the larger one) or
  // disjoint; a partial overlap would corrupt data mid-flight.
  void overlap(const void* send, std::size_t sbytes, const void* recv, std::size_t rbytes,
               std::ptrdiff_t in_place_offset_in_recv, std::ptrdiff_t in_place_offset_in_send) const {
    if (!send || !recv || !sbytes || !rbytes) return;
    const auto s = reinterpret_cast<std::uintptr_t>(send), r = reinterpret_cast<std::uintptr_t>(recv);
    if (s + sbytes <= r || r + rbytes <= s) return;
    if (s == r + static_cast<std::uintptr_t>(in_place_offset_in_recv) && in_place_offset_in_recv >= 0) return;
    if (r == s + static_cast<std::uintptr_t>(in_place_offset_in_send) && in_place_offset_in_send >= 0) return;
    fail("send and recv buffers overlap without being the in-place layout");
  }
};

// Both forms of alltoall once their splits are known: every block within its buffer,
// no two blocks of recv on the same bytes. send and recv may overlap (staged).
Work issue_alltoall(CommImpl& impl, const Checker& c, const CallOptions& o, const void* send, void* recv,
                    std::shared_ptr<collectives::Splits> splits, std::size_t count, DataType dt) {
  if (!o.algorithm.empty()) c.fail("alltoall runs one algorithm (pairwise exchange); CallOptions::algorithm must be empty");
  if (o.compression && o.compression->lossy()) c.fail("compression applies to allreduce only");
  auto span_of = [&](const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs,
                     const char* name) {
    std::size_t end = 0;
    for (std::size_t j = 0; j < counts.size(); ++j) {
      if (displs[j] > std::numeric_limits<std::size_t>::max() - counts[j])
        c.fail(std::string(name) + " block " + std::to_string(j) + " ends past the largest count");
      if (counts[j]) end = std::max(end, c.bytes(displs[j] + counts[j], dt));
    }
    return end;
  };
  const std::size_t sb = span_of(splits->send_counts, splits->send_displs, "send");
  const std::size_t rb = span_of(splits->recv_counts, splits->recv_displs, "recv");
  c.buffer(send, sb, "send", dt);
  c.buffer(recv, rb, "recv", dt);
  const auto placed = c.placed(o, send, sb, recv, rb);
  std::vector<std::pair<std::size_t, std::size_t>> blocks;  // (displ, j) of recv
  for (std::size_t j = 0; j < splits->recv_counts.size(); ++j)
    if (splits->recv_counts[j]) blocks.emplace_back(splits->recv_displs[j], j);
  std::sort(blocks.begin(), blocks.end());
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    const auto [d, j] = blocks[i - 1];
    if (d + splits->recv_counts[j] > blocks[i].first)
      c.fail("recv blocks of ranks " + std::to_string(j) + " and " + std::to_string(blocks[i].second) + " overlap");
  }
  collectives::CollArgs args{CollectiveKind::alltoall, send, recv, count, dt, ReduceOp::sum, 0, std::nullopt, nullptr};
  args.splits = std::move(splits);
  return impl.collective(args, o, placed);
}

}  // namespace

Communicator::Communicator(std::unique_ptr<CommImpl> impl) : impl_(std::move(impl)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

Communicator::Communicator(int rank, int size, const std::string& root, const CommOptions& opts) {
  CommImpl::Setup s;
  s.rank = rank;
  s.size = size;
  s.root = root;
  s.key_prefix = "strata/";
  s.serve_root = true;
  s.options = opts;
  impl_ = std::make_unique<CommImpl>(s);
}

Communicator::Communicator(const UniqueId& id, int rank, int size, const CommOptions& opts) {
  const auto parsed = detail::parse_unique_id(id);
  CommImpl::Setup s;
  s.rank = rank;
  s.size = size;
  s.root = parsed.root;
  s.key_prefix = parsed.nonce + "/";
  s.serve_root = false;  // the process that created the id serves the store
  s.secret = parsed.secret;
  s.options = opts;
  impl_ = std::make_unique<CommImpl>(s);
}

Communicator::Communicator(std::shared_ptr<Store> store, int rank, int size, const CommOptions& opts) {
  if (!store) throw InvalidArgument("communicator creation on rank " + std::to_string(rank) + ": store is null");
  CommImpl::Setup s;
  s.rank = rank;
  s.size = size;
  s.store = std::move(store);
  s.key_prefix = "strata/";
  s.options = opts;
  impl_ = std::make_unique<CommImpl>(s);
}

Communicator Communicator::from_env(const CommOptions& opts) {
  // A dedicated server joins no communicator, and the library does not end a process
  // for its caller: the program asks strata::is_server_process() and serves instead.
  if (detail::is_server_role())
    throw InvalidArgument("Communicator::from_env: STRATA_ROLE=server marks this process as a dedicated parameter "
                          "server, which joins no communicator; call strata::serve_from_env() when "
                          "strata::is_server_process() (include/strata/server.hpp)");
  const auto info = detail::discover_launch();
  return Communicator(info.rank, info.size, info.root, opts);
}

int Communicator::rank() const { return impl_->rank(); }
int Communicator::size() const { return impl_->size(); }
const Locality& Communicator::locality(int r) const { return impl_->locality(r); }
TransportKind Communicator::transport() const { return impl_->transport_kind(); }
std::chrono::milliseconds Communicator::timeout() const { return impl_->timeout(); }
TrafficStats Communicator::traffic() const {
  const auto c = impl_->traffic();
  const auto& d = impl_->copy_counters();
  return {c.wan_payload_sent, c.wan_wire_sent, c.wan_payload_received, c.wan_resent, d.to_host.load(),
          d.to_device.load()};
}

WanPathStats Communicator::wan_path() const {
  const auto p = impl_->wan_path();
  return {p.rtt_s, p.srtt_s, p.rate_bytes_per_s, p.loss, p.streams};
}

std::vector<std::string> Communicator::algorithms(CollectiveKind kind, DataType dt) const {
  std::vector<std::string> out;
  for (const auto& a : collectives::algorithms())
    if (a.supports(kind, dt, 1, shape_of(*impl_))) out.emplace_back(a.name);
  return out;
}

void Communicator::abort() { impl_->abort("abort() called on rank " + std::to_string(rank())); }

Communicator Communicator::shrink(std::span<const int> lost_ranks, const CommOptions& opts) {
  return Communicator(impl_->shrink(lost_ranks, opts));
}

std::vector<int> Communicator::lost_ranks() const { return impl_->lost_ranks(); }

Work Communicator::allreduce(const void* send, void* recv, std::size_t count, DataType dt,
                             ReduceOp op, const CallOptions& o) {
  const Checker c{"allreduce", rank(), impl_.get()};
  c.dtype(dt);
  c.op(op, dt);
  const auto b = c.bytes(count, dt);
  c.buffer(send, b, "send", dt);
  c.buffer(recv, b, "recv", dt);
  c.overlap(send, b, recv, b, 0, 0);
  const auto placed = c.placed(o, send, b, recv, b);
  collectives::CollArgs args{CollectiveKind::allreduce, send, recv, count, dt, op, 0, std::nullopt,
                             c.algorithm(o, CollectiveKind::allreduce, dt, count, shape_of(*impl_))};
  Compression z = impl_->compression_for(o);
  // STRATA_COMPRESS is a policy for the allreduces it can serve (f32 sum/avg gradients);
  // a per-call option is a demand, and anything it cannot serve is an error.
  if (!o.compression && (dt != DataType::f32 || (op != ReduceOp::sum && op != ReduceOp::avg))) z = Compression{};
  if (z.lossy()) {
    if (dt != DataType::f32) c.fail(std::string("compression ") + z.to_string() + " needs f32 data, got " + to_string(dt));
    if (op != ReduceOp::sum && op != ReduceOp::avg)
      c.fail(std::string("compression needs op sum or avg, got ") + to_string(op));
    if (!(z.density > 0 && z.density <= 1)) c.fail("compression density " + std::to_string(z.density) + " is not in (0, 1]");
    try {
      quant::codec_spec(z);
    } catch (const InvalidArgument& e) {
      c.fail(std::string("compression: ") + e.what());
    }
    // Frameworks reuse gradient buffers step after step, so the buffer names the tensor
    // well enough when the caller gives no key.
    if (z.error_feedback && z.key.empty()) {
      char name[64];
      std::snprintf(name, sizeof name, "buffer@%p:%zu", recv, count);
      z.key = name;
    }
    args.compression = std::move(z);
  }
  return impl_->collective(args, o, placed);
}

void Communicator::reset_residuals(const std::string& key) {
  impl_->with_feedback([&](quant::ErrorFeedback& f) { key.empty() ? f.reset_all() : f.reset(key); });
}

std::vector<std::byte> Communicator::save_residuals() {
  std::vector<std::byte> out;
  impl_->with_feedback([&](quant::ErrorFeedback& f) { out = f.save(); });
  return out;
}

void Communicator::restore_residuals(std::span<const std::byte> saved) {
  impl_->with_feedback([&](quant::ErrorFeedback& f) { f.restore(saved); });
}

Work Communicator::reduce_scatter(const void* send, void* recv, std::size_t recvcount,
                                  DataType dt, ReduceOp op, const CallOptions& o) {
  const Checker c{"reduce_scatter", rank(), impl_.get()};
  c.dtype(dt);
  c.op(op, dt);
  const auto rb = c.bytes(recvcount, dt);
  const auto sb = c.bytes(recvcount, dt, static_cast<std::size_t>(size()));
  c.buffer(send, sb, "send", dt);
  c.buffer(recv, rb, "recv", dt);
  c.overlap(send, sb, recv, rb, -1, static_cast<std::ptrdiff_t>(rb) * rank());
  return impl_->collective({CollectiveKind::reduce_scatter, send, recv, recvcount, dt, op, 0, std::nullopt,
                            c.algorithm(o, CollectiveKind::reduce_scatter, dt, recvcount, shape_of(*impl_))}, o,
                           c.placed(o, send, sb, recv, rb));
}

Work Communicator::allgather(const void* send, void* recv, std::size_t sendcount, DataType dt,
                             const CallOptions& o) {
  const Checker c{"allgather", rank(), impl_.get()};
  c.dtype(dt);
  const auto sb = c.bytes(sendcount, dt);
  const auto rb = c.bytes(sendcount, dt, static_cast<std::size_t>(size()));
  c.buffer(send, sb, "send", dt);
  c.buffer(recv, rb, "recv", dt);
  c.overlap(send, sb, recv, rb, static_cast<std::ptrdiff_t>(sb) * rank(), -1);
  return impl_->collective({CollectiveKind::allgather, send, recv, sendcount, dt, ReduceOp::sum, 0, std::nullopt,
                            c.algorithm(o, CollectiveKind::allgather, dt, sendcount, shape_of(*impl_))}, o,
                           c.placed(o, send, sb, recv, rb));
}

Work Communicator::broadcast(const void* send, void* recv, std::size_t count, DataType dt,
                             int root, const CallOptions& o) {
  const Checker c{"broadcast", rank(), impl_.get()};
  c.dtype(dt);
  c.rank_arg(root, size(), "root");
  const auto b = c.bytes(count, dt);
  if (rank() == root) c.buffer(send, b, "send", dt);
  c.buffer(recv, b, "recv", dt);
  if (rank() == root) c.overlap(send, b, recv, b, 0, 0);
  return impl_->collective({CollectiveKind::broadcast, rank() == root ? send : recv, recv, count, dt,
                            ReduceOp::sum, root, std::nullopt,
                            c.algorithm(o, CollectiveKind::broadcast, dt, count, shape_of(*impl_))}, o,
                           c.placed(o, send, rank() == root ? b : 0, recv, b));
}

Work Communicator::reduce(const void* send, void* recv, std::size_t count, DataType dt,
                          ReduceOp op, int root, const CallOptions& o) {
  const Checker c{"reduce", rank(), impl_.get()};
  c.dtype(dt);
  c.op(op, dt);
  c.rank_arg(root, size(), "root");
  const auto b = c.bytes(count, dt);
  c.buffer(send, b, "send", dt);
  if (rank() == root) {
    c.buffer(recv, b, "recv", dt);
    c.overlap(send, b, recv, b, 0, 0);
  }
  return impl_->collective({CollectiveKind::reduce, send, rank() == root ? recv : nullptr, count, dt,
                            op, root, std::nullopt, c.algorithm(o, CollectiveKind::reduce, dt, count, shape_of(*impl_))}, o,
                           c.placed(o, send, b, recv, rank() == root ? b : 0));
}

Work Communicator::barrier(const CallOptions& o) {
  const Checker c{"barrier", rank(), impl_.get()};
  return impl_->collective({CollectiveKind::barrier, nullptr, nullptr, 0, DataType::u8, ReduceOp::sum, 0,
                            std::nullopt, c.algorithm(o, CollectiveKind::barrier, DataType::u8, 0, shape_of(*impl_))}, o,
                           {});
}

Work Communicator::alltoall(const void* send, void* recv, std::size_t count, DataType dt, const CallOptions& o) {
  const Checker c{"alltoall", rank(), impl_.get()};
  c.dtype(dt);
  const auto p = static_cast<std::size_t>(size());
  c.bytes(count, dt, p);
  auto splits = std::make_shared<collectives::Splits>();
  splits->send_counts.assign(p, count);
  splits->recv_counts.assign(p, count);
  for (std::size_t j = 0; j < p; ++j) splits->send_displs.push_back(j * count);
  splits->recv_displs = splits->send_displs;
  return issue_alltoall(*impl_, c, o, send, recv, std::move(splits), count, dt);
}

Work Communicator::alltoallv(const void* send, std::span<const std::size_t> send_counts,
                             std::span<const std::size_t> send_displs, void* recv,
                             std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                             DataType dt, const CallOptions& o) {
  const Checker c{"alltoallv", rank(), impl_.get()};
  c.dtype(dt);
  const auto p = static_cast<std::size_t>(size());
  const std::pair<std::span<const std::size_t>, const char*> lists[] = {
      {send_counts, "send_counts"}, {send_displs, "send_displs"}, {recv_counts, "recv_counts"}, {recv_displs, "recv_displs"}};
  for (const auto& [l, name] : lists)
    if (l.size() != p)
      c.fail(std::string(name) + " has " + std::to_string(l.size()) + " entries for " + std::to_string(p) + " ranks");
  const auto me = static_cast<std::size_t>(rank());
  if (send_counts[me] != recv_counts[me])
    c.fail("send_counts[" + std::to_string(me) + "] = " + std::to_string(send_counts[me]) + " but recv_counts[" +
           std::to_string(me) + "] = " + std::to_string(recv_counts[me]) + " (this rank's block to itself)");
  auto splits = std::make_shared<collectives::Splits>();
  splits->send_counts.assign(send_counts.begin(), send_counts.end());
  splits->send_displs.assign(send_displs.begin(), send_displs.end());
  splits->recv_counts.assign(recv_counts.begin(), recv_counts.end());
  splits->recv_displs.assign(recv_displs.begin(), recv_displs.end());
  return issue_alltoall(*impl_, c, o, send, recv, std::move(splits), detail::Fingerprint::kUnevenSplits, dt);
}

Work Communicator::send(const void* buf, std::size_t count, DataType dt, int peer,
                        const CallOptions& o) {
  const Checker c{"send", rank(), impl_.get()};
  c.dtype(dt);
  c.rank_arg(peer, size(), "peer");
  c.buffer(buf, c.bytes(count, dt), "buf");
  c.host_only(o, buf, c.bytes(count, dt));
  return impl_->point_to_point(true, const_cast<void*>(buf), count, dt, peer, o);
}

Work Communicator::recv_any(void* buf, std::size_t count, DataType dt, int* source, const CallOptions& o) {
  const Checker c{"recv_any", rank(), impl_.get()};
  c.dtype(dt);
  if (!source) throw InvalidArgument("recv_any on rank " + std::to_string(rank()) + ": source is null");
  c.buffer(buf, c.bytes(count, dt), "buf");
  c.host_only(o, buf, c.bytes(count, dt));
  return impl_->recv_any(buf, count, dt, source, o);
}

Work Communicator::recv(void* buf, std::size_t count, DataType dt, int peer, const CallOptions& o) {
  const Checker c{"recv", rank(), impl_.get()};
  c.dtype(dt);
  c.rank_arg(peer, size(), "peer");
  c.buffer(buf, c.bytes(count, dt), "buf");
  c.host_only(o, buf, c.bytes(count, dt));
  return impl_->point_to_point(false, buf, count, dt, peer, o);
}

}  // namespace strata
