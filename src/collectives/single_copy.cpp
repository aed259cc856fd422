// Single-copy collectives among the processes of one host (groups with shared_memory):
// every rank reads its peers' buffers itself, through the kernel, instead of having the
// bytes sent to it.
//
// Message-based algorithms move a peer's block twice through memory before reducing it:
// the transport copies it into a staging buffer (one rendezvous per chunk), and the
// reduction reads it back once it has left the cache. Here the owner of each block reads
// that block from every peer one fragment at a time, into a buffer small enough to stay
// in cache, and reduces it at once. In an allreduce it then writes the finished fragment
// into every peer's result while the fragment is still in cache; reduce-scatter keeps
// it, and allgather reads every block from its owner. The data moves once, and only two
// small messages per peer remain:
//
//   1. where my buffers are (with the call's stamp, checked before any address is used);
//   2. I am done with your buffers: I have read what I needed from them and written what
//      I owed to them, so you may return and reuse them.
//
// Each block is reduced by its owner alone, so every rank ends with the same bits. No
// byte of a buffer is touched by two ranks: block q of every rank's buffers belongs to
// q's reduction, which reads a fragment of it before writing the result over it (in
// place, the same bytes).
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"
#include "strata/errors.hpp"

namespace strata::collectives {

namespace {

// Bytes read from a peer per step of the reduction: this plus the own fragment and the
// result stay within a core's L2 (1-2 MiB on current x86), so the reduction reads the
// peer's bytes from cache right after the kernel copied them there.
constexpr std::size_t kFragmentBytes = std::size_t{128} << 10;

// What a rank announces: its buffers, and how many bytes it was called with.
struct Buffers {
  std::uint64_t send = 0, recv = 0, bytes = 0;
};

class SingleCopy {
 public:
  SingleCopy(Context& ctx, const Group& g) : ctx_(ctx), g_(g), theirs_(static_cast<std::size_t>(g.size())) {}

  // Round 1: tells every peer where this rank's buffers are and learns theirs. Also
  // posts the receives of round 2, so that they cost no time on the critical path.
  void announce(const void* send, void* recv, std::size_t bytes) {
    const int p = g_.size();
    const std::string& stamp = ctx_.stamp();
    const Buffers mine{reinterpret_cast<std::uintptr_t>(send), reinterpret_cast<std::uintptr_t>(recv), bytes};
    mine_.assign(reinterpret_cast<const char*>(&mine), sizeof mine);
    mine_ += stamp;
    std::vector<std::string> heard(static_cast<std::size_t>(p), std::string(mine_.size(), '\0'));
    std::vector<RequestPtr> reqs;
    for (int k = 1; k < p; ++k) {
      const int from = direct_from(g_.me, k, p);
      reqs.push_back(ctx_.recv(g_.rank(from), Channel::single_copy, heard[static_cast<std::size_t>(from)].data(), mine_.size()));
      released_.push_back(ctx_.recv(g_.rank(from), Channel::result, nullptr, 0));
    }
    for (int k = 1; k < p; ++k)
      reqs.push_back(ctx_.send(g_.rank(direct_to(g_.me, k, p)), Channel::single_copy, mine_.data(), mine_.size()));
    ctx_.wait_all(reqs);
    for (int k = 1; k < p; ++k) {
      const int from = direct_from(g_.me, k, p);
      const std::string& h = heard[static_cast<std::size_t>(from)];
      ctx_.expect_bytes(reqs[static_cast<std::size_t>(k - 1)], mine_.size());
      if (!stamp.empty()) ctx_.check_stamp(g_.rank(from), h.substr(sizeof(Buffers)));
      Buffers b;
      std::memcpy(&b, h.data(), sizeof b);
      // Never read a range the peer did not say it holds.
      if (b.bytes != bytes)
        throw TransportError(ctx_.what() + " on rank " + std::to_string(ctx_.my_rank()) + ": rank " +
                             std::to_string(g_.rank(from)) + " announced " + std::to_string(b.bytes) +
                             " bytes where " + std::to_string(bytes) + " were expected");
      theirs_[static_cast<std::size_t>(from)] = b;
    }
  }

  // This rank's block of the reduction: out[0, B.size(me)) = op over every member's
  // send[B.begin(me) ...], reading peers' copies fragment by fragment. With `push`
  // (allreduce), each finished fragment also goes to the same place in every peer's recv.
  void reduce_mine(const char* send, char* out, const Blocks& B, DataType dt, ReduceOp op, bool push) {
    const int p = g_.size(), me = g_.me;
    const std::size_t esz = dtype_size(dt), n = B.size(me), begin = B.begin(me) * esz;
    const std::size_t step = std::max<std::size_t>(1, kFragmentBytes / esz);
    char* tmp = static_cast<char*>(ctx_.scratch(0, std::min(n, step) * esz));
    for (std::size_t off = 0; off < n; off += step) {
      const std::size_t len = std::min(step, n - off);
      const char* own = send + begin + off * esz;
      char* dst = out + off * esz;
      // From the nearest peer on, as direct does: a fixed order, so reruns give the same bits.
      for (int k = 1; k < p; ++k) {
        const int from = direct_from(me, k, p);
        ctx_.read_peer(g_.rank(from), theirs_[static_cast<std::size_t>(from)].send + begin + off * esz, tmp, len * esz);
        kernels::reduce(dt, op, dst, k == 1 ? own : dst, tmp, len);
      }
      if (op == ReduceOp::avg) kernels::finish_avg(dt, dst, len, p);
      for (int k = 1; push && k < p; ++k) {
        const int to = direct_to(me, k, p);
        ctx_.write_peer(g_.rank(to), theirs_[static_cast<std::size_t>(to)].recv + begin + off * esz, dst, len * esz);
      }
    }
  }

  // Reads every peer's block (its input) into out at the peer's place (allgather).
  void gather(char* out, const Blocks& B, std::size_t esz) {
    const int p = g_.size();
    for (int k = 1; k < p; ++k) {
      const int from = direct_from(g_.me, k, p);
      ctx_.read_peer(g_.rank(from), theirs_[static_cast<std::size_t>(from)].send, out + B.begin(from) * esz,
                     B.size(from) * esz);
    }
  }

  // Round 2: tells every peer this rank is done with its buffers, and waits until every
  // peer is done with this rank's.
  void release() {
    std::vector<RequestPtr> sent;
    for (int k = 1; k < g_.size(); ++k)
      sent.push_back(ctx_.send(g_.rank(direct_to(g_.me, k, g_.size())), Channel::result, nullptr, 0));
    ctx_.wait_all(released_);
    ctx_.wait_all(sent);
  }

 private:
  Context& ctx_;
  const Group& g_;
  std::string mine_;               // round 1's message, alive until sent
  std::vector<Buffers> theirs_;    // by group index
  std::vector<RequestPtr> released_;  // round 2 from each peer
};

}  // namespace

void single_copy_allreduce(Context& ctx, const Group& g, const void* send, void* recv, std::size_t count,
                           DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt);
  if (g.size() == 1 || count == 0) return copy_if_distinct(recv, send, count * esz);
  const Blocks B{count, g.size(), 0};
  SingleCopy sc(ctx, g);
  sc.announce(send, recv, count * esz);
  sc.reduce_mine(static_cast<const char*>(send), static_cast<char*>(recv) + B.begin(g.me) * esz, B, dt, op, true);
  sc.release();
}

void single_copy_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv, std::size_t recvcount,
                                DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt);
  if (g.size() == 1 || recvcount == 0) return copy_if_distinct(recv, send, recvcount * esz);
  const Blocks B{recvcount * static_cast<std::size_t>(g.size()), g.size(), recvcount};
  SingleCopy sc(ctx, g);
  sc.announce(send, recv, recvcount * static_cast<std::size_t>(g.size()) * esz);
  // In place recv is send's own block: reduce(out, a, b) allows out == a.
  sc.reduce_mine(static_cast<const char*>(send), static_cast<char*>(recv), B, dt, op, false);
  sc.release();
}

void single_copy_allgather(Context& ctx, const Group& g, const void* send, void* recv, std::size_t sendcount,
                           DataType dt) {
  const std::size_t block = sendcount * dtype_size(dt);
  char* out = static_cast<char*>(recv);
  copy_if_distinct(out + static_cast<std::size_t>(g.me) * block, send, block);
  if (g.size() == 1 || sendcount == 0) return;
  const Blocks B{sendcount * static_cast<std::size_t>(g.size()), g.size(), sendcount};
  SingleCopy sc(ctx, g);
  sc.announce(send, recv, block);
  sc.gather(out, B, dtype_size(dt));
  sc.release();
}

}  // namespace strata::collectives
