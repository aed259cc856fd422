// A level inside a region on NCCL. Pieces follow collectives::piece_begin: where they are
// all equal, one ncclReduceScatter / ncclAllGather in place; otherwise one ncclReduce or
// ncclBroadcast per piece, rooted at its owner, in one NCCL group.
#include <stdexcept>
#include <string>

#include "collectives/patterns.hpp"
#include "hierarchy/device_engines.hpp"
#include "strata/errors.hpp"

namespace strata::hierarchy {

using collectives::Channel;
using collectives::CollArgs;
using collectives::Context;
using collectives::Group;
using collectives::Steps;

NcclComms::~NcclComms() {
  for (auto& [ranks, c] : comms_) nccl_.comm_destroy(c);
}

void NcclComms::abort() {
  for (auto& [ranks, c] : comms_) nccl_.comm_abort(c);
  comms_.clear();
}

device::NcclComm NcclComms::get(const Group& g) const {
  const auto it = comms_.find(g.ranks);
  if (it == comms_.end()) throw std::logic_error("no NCCL communicator for a group that ensure() did not make");
  return it->second;
}

Steps NcclComms::ensure(Context& ctx, const Group& g) {
  if (comms_.count(g.ranks)) co_return;
  device::NcclUniqueId id{};
  const std::string what = ctx.what() + ": the NCCL communicator of ranks " + std::to_string(g.rank(0)) + ".." +
                           std::to_string(g.rank(g.size() - 1));
  // The id goes out, every member answers, and only then does anyone enter NCCL's init,
  // which blocks until all members do: a member that is not in this call (buffers of the
  // other kind, which the fingerprints report) leaves the others waiting here, in strata,
  // where the deadline and aborts reach them.
  if (g.me == 0) {
    nccl_.check(nccl_.get_unique_id(&id), "ncclGetUniqueId", what);
    std::vector<collectives::RequestPtr> reqs;
    for (int m = 1; m < g.size(); ++m) {
      reqs.push_back(ctx.send(g.rank(m), Channel::nccl_id, &id, sizeof id));
      reqs.push_back(ctx.recv(g.rank(m), Channel::nccl_id, nullptr, 0));
    }
    co_await ctx.wait_all(std::move(reqs));
    for (int m = 1; m < g.size(); ++m) reqs.push_back(ctx.send(g.rank(m), Channel::nccl_id, nullptr, 0));
    co_await ctx.wait_all(std::move(reqs));
  } else {
    auto r = ctx.recv(g.rank(0), Channel::nccl_id, &id, sizeof id);
    co_await ctx.wait(r);
    ctx.expect_bytes(r, sizeof id);
    co_await ctx.wait(ctx.send(g.rank(0), Channel::nccl_id, nullptr, 0), ctx.recv(g.rank(0), Channel::nccl_id, nullptr, 0));
  }
  device::NcclComm c = nullptr;
  nccl_.check(nccl_.comm_init_rank(&c, g.size(), id, g.me), "ncclCommInitRank", what);
  comms_.emplace(g.ranks, c);
}

namespace {

class NcclEngine final : public LevelEngine {
 public:
  NcclEngine(NcclComms& comms, device::CopyStream& copies) : comms_(comms), copies_(copies) {}
  const char* name() const override { return "nccl"; }

  // A flat communicator's call, NCCL over the whole group (roots are group indices).
  Steps collective(Context& ctx, const Group& g, const CollArgs& a) const override {
    // The stream first: it makes the buffers' context current, where NCCL makes its communicator.
    const auto stream = copies_.device_stream();
    co_await comms_.ensure(ctx, g);
    const auto& nccl = comms_.nccl();
    const auto comm = comms_.get(g);
    const int ndt = device::nccl_dtype(a.dtype), nop = device::nccl_op(a.op);
    switch (a.kind) {
      case CollectiveKind::allreduce:
        nccl.check(nccl.all_reduce(a.send, a.recv, a.count, ndt, nop, comm, stream), "ncclAllReduce", ctx.what());
        break;
      case CollectiveKind::reduce_scatter:
        nccl.check(nccl.reduce_scatter(a.send, a.recv, a.count, ndt, nop, comm, stream), "ncclReduceScatter",
                   ctx.what());
        break;
      case CollectiveKind::allgather:
        nccl.check(nccl.all_gather(a.send, a.recv, a.count, ndt, comm, stream), "ncclAllGather", ctx.what());
        break;
      case CollectiveKind::broadcast:
        nccl.check(nccl.broadcast(a.send, a.recv, a.count, ndt, a.root, comm, stream), "ncclBroadcast", ctx.what());
        break;
      case CollectiveKind::reduce:
        // Off the root recv is null, and NCCL leaves recvbuff alone there: send stands in.
        nccl.check(nccl.reduce(a.send, a.recv ? a.recv : const_cast<void*>(a.send), a.count, ndt, nop, a.root, comm,
                               stream),
                   "ncclReduce", ctx.what());
        break;
      default:
        throw std::logic_error(std::string("the NCCL engine does not run ") + to_string(a.kind));
    }
  }

  Steps reduce_scatter_pieces(Context& ctx, const Group& g, const void* send, void* recv, std::size_t n, DataType dt,
                              ReduceOp op) const override {
    // The stream first: it makes the buffers' context current, where NCCL makes its communicator.
    const auto stream = copies_.device_stream();
    co_await comms_.ensure(ctx, g);
    const auto& nccl = comms_.nccl();
    const auto comm = comms_.get(g);
    const std::size_t esz = dtype_size(dt), parts = static_cast<std::size_t>(g.size());
    const auto* s = static_cast<const char*>(send);
    auto* r = static_cast<char*>(recv);
    const int ndt = device::nccl_dtype(dt), nop = device::nccl_op(op);
    if (n % parts == 0) {
      const std::size_t k = n / parts;
      // NCCL's in place is recv == send + me*k: our piece of recv is where it lands.
      nccl.check(nccl.reduce_scatter(s, r + static_cast<std::size_t>(g.me) * k * esz, k, ndt, nop, comm, stream),
                 "ncclReduceScatter", ctx.what());
      co_return;
    }
    nccl.check(nccl.group_start(), "ncclGroupStart", ctx.what());
    for (std::size_t m = 0; m < parts; ++m) {
      const std::size_t b = collectives::piece_begin(n, parts, m) * esz, len = collectives::piece_size(n, parts, m);
      nccl.check(nccl.reduce(s + b, r + b, len, ndt, nop, static_cast<int>(m), comm, stream), "ncclReduce",
                 ctx.what());
    }
    nccl.check(nccl.group_end(), "ncclGroupEnd", ctx.what());
  }

  Steps allgather_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt) const override {
    // The stream first: it makes the buffers' context current, where NCCL makes its communicator.
    const auto stream = copies_.device_stream();
    co_await comms_.ensure(ctx, g);
    const auto& nccl = comms_.nccl();
    const auto comm = comms_.get(g);
    const std::size_t esz = dtype_size(dt), parts = static_cast<std::size_t>(g.size());
    auto* p = static_cast<char*>(buf);
    const int ndt = device::nccl_dtype(dt);
    if (n % parts == 0) {
      const std::size_t k = n / parts;
      nccl.check(nccl.all_gather(p + static_cast<std::size_t>(g.me) * k * esz, p, k, ndt, comm, stream),
                 "ncclAllGather", ctx.what());
      co_return;
    }
    nccl.check(nccl.group_start(), "ncclGroupStart", ctx.what());
    for (std::size_t m = 0; m < parts; ++m) {
      const std::size_t b = collectives::piece_begin(n, parts, m) * esz, len = collectives::piece_size(n, parts, m);
      nccl.check(nccl.broadcast(p + b, p + b, len, ndt, static_cast<int>(m), comm, stream), "ncclBroadcast",
                 ctx.what());
    }
    nccl.check(nccl.group_end(), "ncclGroupEnd", ctx.what());
  }

  Steps allreduce_pieces(Context&, const Group&, void*, std::size_t, DataType, ReduceOp, Channel, int) const override {
    throw std::logic_error("the NCCL engine does not run the region level: device plans stage it");
  }
  // Member `from` sends each member its piece (ncclSend/ncclRecv in one group); its own
  // piece it copies on the stream.
  Steps scatter_pieces(Context& ctx, const Group& g, const char* src, char* out, std::size_t n, DataType dt,
                       int from) const override {
    // The stream first: it makes the buffers' context current, where NCCL makes its communicator.
    const auto stream = copies_.device_stream();
    co_await comms_.ensure(ctx, g);
    const auto& nccl = comms_.nccl();
    const auto comm = comms_.get(g);
    const std::size_t esz = dtype_size(dt), parts = static_cast<std::size_t>(g.size());
    const int ndt = device::nccl_dtype(dt);
    const auto me = static_cast<std::size_t>(g.me);
    nccl.check(nccl.group_start(), "ncclGroupStart", ctx.what());
    if (g.me == from) {
      for (std::size_t m = 0; m < parts; ++m) {
        const std::size_t b = collectives::piece_begin(n, parts, m) * esz, len = collectives::piece_size(n, parts, m);
        if (m == me) {
          if (src != out) copies_.within_device(out + b, src + b, len * esz);
        } else if (len) {
          nccl.check(nccl.send(src + b, len, ndt, static_cast<int>(m), comm, stream), "ncclSend", ctx.what());
        }
      }
    } else if (const std::size_t len = collectives::piece_size(n, parts, me)) {
      nccl.check(nccl.recv(out + collectives::piece_begin(n, parts, me) * esz, len, ndt, from, comm, stream),
                 "ncclRecv", ctx.what());
    }
    nccl.check(nccl.group_end(), "ncclGroupEnd", ctx.what());
  }

 private:
  NcclComms& comms_;
  device::CopyStream& copies_;
};

}  // namespace

std::unique_ptr<LevelEngine> nccl_engine(NcclComms& comms, device::CopyStream& copies) {
  return std::make_unique<NcclEngine>(comms, copies);
}

}  // namespace strata::hierarchy
