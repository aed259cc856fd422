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

// One group's NCCL calls on the copy stream, each checked, errors naming the collective.
struct Issue {
  const device::NcclLibrary& lib;
  device::NcclComm comm;
  device::CuStream stream;
  const std::string& what;
  void operator()(device::NcclResult r, const char* call) const { lib.check(r, call, what); }
  // f() issues calls that NCCL must run together (one per piece, sends and receives).
  template <class F>
  void grouped(F f) const {
    (*this)(lib.group_start(), "ncclGroupStart");
    f();
    (*this)(lib.group_end(), "ncclGroupEnd");
  }
};

class NcclEngine final : public LevelEngine {
 public:
  NcclEngine(NcclComms& comms, device::CopyStream& copies) : comms_(comms), copies_(copies) {}
  const char* name() const override { return "nccl"; }

  // A flat communicator's call, NCCL over the whole group (roots are group indices).
  Steps collective(Context& ctx, const Group& g, const CollArgs& a) const override {
    const auto stream = copies_.device_stream();  // first: it makes the buffers' context current
    co_await comms_.ensure(ctx, g);
    const Issue nccl{comms_.nccl(), comms_.get(g), stream, ctx.what()};
    const int ndt = device::nccl_dtype(a.dtype), nop = device::nccl_op(a.op);
    switch (a.kind) {
      case CollectiveKind::allreduce:
        nccl(nccl.lib.all_reduce(a.send, a.recv, a.count, ndt, nop, nccl.comm, stream), "ncclAllReduce");
        break;
      case CollectiveKind::reduce_scatter:
        nccl(nccl.lib.reduce_scatter(a.send, a.recv, a.count, ndt, nop, nccl.comm, stream), "ncclReduceScatter");
        break;
      case CollectiveKind::allgather:
        nccl(nccl.lib.all_gather(a.send, a.recv, a.count, ndt, nccl.comm, stream), "ncclAllGather");
        break;
      case CollectiveKind::broadcast:
        nccl(nccl.lib.broadcast(a.send, a.recv, a.count, ndt, a.root, nccl.comm, stream), "ncclBroadcast");
        break;
      case CollectiveKind::reduce:
        // Off the root recv is null, and NCCL leaves recvbuff alone there: send stands in.
        nccl(nccl.lib.reduce(a.send, a.recv ? a.recv : const_cast<void*>(a.send), a.count, ndt, nop, a.root,
                             nccl.comm, stream),
             "ncclReduce");
        break;
      default:
        throw std::logic_error(std::string("the NCCL engine does not run ") + to_string(a.kind));
    }
  }

  Steps reduce_scatter_pieces(Context& ctx, const Group& g, const void* send, void* recv, std::size_t n, DataType dt,
                              ReduceOp op) const override {
    const auto stream = copies_.device_stream();  // first: it makes the buffers' context current
    co_await comms_.ensure(ctx, g);
    const Issue nccl{comms_.nccl(), comms_.get(g), stream, ctx.what()};
    const std::size_t esz = dtype_size(dt), parts = static_cast<std::size_t>(g.size());
    const auto* s = static_cast<const char*>(send);
    auto* r = static_cast<char*>(recv);
    const int ndt = device::nccl_dtype(dt), nop = device::nccl_op(op);
    if (n % parts == 0) {
      const std::size_t k = n / parts;
      // NCCL's in place is recv == send + me*k: our piece of recv is where it lands.
      nccl(nccl.lib.reduce_scatter(s, r + static_cast<std::size_t>(g.me) * k * esz, k, ndt, nop, nccl.comm, stream),
           "ncclReduceScatter");
      co_return;
    }
    nccl.grouped([&] {
      for (std::size_t m = 0; m < parts; ++m) {
        const std::size_t b = collectives::piece_begin(n, parts, m) * esz, len = collectives::piece_size(n, parts, m);
        nccl(nccl.lib.reduce(s + b, r + b, len, ndt, nop, static_cast<int>(m), nccl.comm, stream), "ncclReduce");
      }
    });
  }

  Steps allgather_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt) const override {
    const auto stream = copies_.device_stream();  // first: it makes the buffers' context current
    co_await comms_.ensure(ctx, g);
    const Issue nccl{comms_.nccl(), comms_.get(g), stream, ctx.what()};
    const std::size_t esz = dtype_size(dt), parts = static_cast<std::size_t>(g.size());
    auto* p = static_cast<char*>(buf);
    const int ndt = device::nccl_dtype(dt);
    if (n % parts == 0) {
      const std::size_t k = n / parts;
      nccl(nccl.lib.all_gather(p + static_cast<std::size_t>(g.me) * k * esz, p, k, ndt, nccl.comm, stream),
           "ncclAllGather");
      co_return;
    }
    nccl.grouped([&] {
      for (std::size_t m = 0; m < parts; ++m) {
        const std::size_t b = collectives::piece_begin(n, parts, m) * esz, len = collectives::piece_size(n, parts, m);
        nccl(nccl.lib.broadcast(p + b, p + b, len, ndt, static_cast<int>(m), nccl.comm, stream), "ncclBroadcast");
      }
    });
  }

  Steps allreduce_pieces(Context&, const Group&, void*, std::size_t, DataType, ReduceOp, Channel, int) const override {
    throw std::logic_error("the NCCL engine does not run the region level: device plans stage it");
  }
  // Member `from` sends each member its piece (ncclSend/ncclRecv in one group); its own
  // piece it copies on the stream.
  Steps scatter_pieces(Context& ctx, const Group& g, const char* src, char* out, std::size_t n, DataType dt,
                       int from) const override {
    const auto stream = copies_.device_stream();  // first: it makes the buffers' context current
    co_await comms_.ensure(ctx, g);
    const Issue nccl{comms_.nccl(), comms_.get(g), stream, ctx.what()};
    const std::size_t esz = dtype_size(dt), parts = static_cast<std::size_t>(g.size());
    const int ndt = device::nccl_dtype(dt);
    const auto me = static_cast<std::size_t>(g.me);
    if (g.me == from && src != out) {
      const std::size_t b = collectives::piece_begin(n, parts, me) * esz;
      copies_.within_device(out + b, src + b, collectives::piece_size(n, parts, me) * esz);
    }
    nccl.grouped([&] {
      if (g.me == from) {
        for (std::size_t m = 0; m < parts; ++m) {
          const std::size_t b = collectives::piece_begin(n, parts, m) * esz, len = collectives::piece_size(n, parts, m);
          if (m != me && len)
            nccl(nccl.lib.send(src + b, len, ndt, static_cast<int>(m), nccl.comm, stream), "ncclSend");
        }
      } else if (const std::size_t len = collectives::piece_size(n, parts, me)) {
        nccl(nccl.lib.recv(out + collectives::piece_begin(n, parts, me) * esz, len, ndt, from, nccl.comm, stream),
             "ncclRecv");
      }
    });
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
