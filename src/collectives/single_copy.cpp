// Collectives among the processes of one host (groups with shared_memory), moving data
// through memory the ranks share instead of messages.
//
// Message-based algorithms move a peer's block twice through memory before reducing it:
// the transport copies it into a staging buffer (one rendezvous per chunk), and the
// reduction reads it back once it has left the cache. Here:
//
// - allreduce goes through the host's shared segment (Transport::shared_slot), one piece
//   at a time: every rank copies its piece into its slot, reduces its block straight
//   from its peers' slots, puts the result in its slot, and copies the peers' results
//   out of theirs. Two plain copies that stay in cache cost less than one copy through
//   the kernel, which pins every page (BENCHMARKS.md, "A shared segment per host").
// - reduce-scatter and allgather read their peers' buffers through the kernel
//   (read_peer, cross-memory attach): the owner of each block reads it from every peer
//   one fragment at a time, into a buffer small enough to stay in cache, and reduces it
//   at once. Two notices per peer: where my buffers are, then I am done with yours.
//
// Each block is reduced by its owner alone, in a fixed order, so every rank ends with
// the same bits. The first notice of every call carries the call's stamp and byte count,
// checked before any peer memory is read.
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

[[noreturn]] void mismatched_bytes(const Context& ctx, int peer, std::uint64_t theirs, std::uint64_t mine) {
  throw TransportError(ctx.what() + " on rank " + std::to_string(ctx.my_rank()) + ": rank " + std::to_string(peer) +
                       " announced " + std::to_string(theirs) + " bytes where " + std::to_string(mine) +
                       " were expected");
}

// What a rank announces: its input, and how many bytes it was called with.
struct Buffers {
  std::uint64_t send = 0, bytes = 0;
};

// One round of notices: tells every peer and hears from each on channel ch. With
// `mine` (the first round of a call) the notices carry buffers, the call's stamp and
// byte count, and every peer's is checked before it is returned (by group index);
// without, they are empty.
std::vector<Buffers> notify(Context& ctx, const Group& g, Channel ch, const Buffers* mine) {
  const int p = g.size();
  std::string msg;
  if (mine) {
    msg.assign(reinterpret_cast<const char*>(mine), sizeof *mine);
    msg += ctx.stamp();
  }
  std::vector<std::string> heard(static_cast<std::size_t>(p), std::string(msg.size(), '\0'));
  std::vector<RequestPtr> reqs;
  for (int k = 1; k < p; ++k) {
    const int from = direct_from(g.me, k, p);
    reqs.push_back(ctx.recv(g.rank(from), ch, heard[static_cast<std::size_t>(from)].data(), msg.size()));
  }
  for (int k = 1; k < p; ++k) reqs.push_back(ctx.send(g.rank(direct_to(g.me, k, p)), ch, msg.data(), msg.size()));
  ctx.wait_all(reqs);
  std::vector<Buffers> theirs;
  if (!mine) return theirs;
  theirs.resize(static_cast<std::size_t>(p));
  for (int k = 1; k < p; ++k) {
    const int from = direct_from(g.me, k, p);
    const std::string& h = heard[static_cast<std::size_t>(from)];
    ctx.expect_bytes(reqs[static_cast<std::size_t>(k - 1)], msg.size());
    if (!ctx.stamp().empty()) ctx.check_stamp(g.rank(from), h.substr(sizeof(Buffers)));
    Buffers& b = theirs[static_cast<std::size_t>(from)];
    std::memcpy(&b, h.data(), sizeof b);
    // Never read a range the peer did not say it holds.
    if (b.bytes != mine->bytes) mismatched_bytes(ctx, g.rank(from), b.bytes, mine->bytes);
  }
  return theirs;
}

class SingleCopy {
 public:
  SingleCopy(Context& ctx, const Group& g) : ctx_(ctx), g_(g) {}

  // Round 1: tells every peer where this rank's input is and learns theirs. Also posts
  // the receives of round 2, so that they cost no time on the critical path.
  void announce(const void* send, std::size_t bytes) {
    for (int k = 1; k < g_.size(); ++k)
      released_.push_back(ctx_.recv(g_.rank(direct_from(g_.me, k, g_.size())), Channel::result, nullptr, 0));
    const Buffers mine{reinterpret_cast<std::uintptr_t>(send), bytes};
    theirs_ = notify(ctx_, g_, Channel::single_copy, &mine);
  }

  // This rank's block of the reduction: out[0, B.size(me)) = op over every member's
  // send[B.begin(me) ...], reading peers' copies fragment by fragment.
  void reduce_mine(const char* send, char* out, const Blocks& B, DataType dt, ReduceOp op) {
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
  std::vector<Buffers> theirs_;       // by group index
  std::vector<RequestPtr> released_;  // round 2 from each peer
};

// Allreduce through the host's shared segment, one piece of at most a slot per rank at
// a time. Each rank copies its piece (but for its own block) into its slot, reduces its
// block from its own input and every peer's slot, puts the result in its slot, and
// copies the peers' results out of theirs. Three rounds of notices per piece: "my
// piece is in my slot", "my block is reduced", "I am done with your slot".
void segment_allreduce(Context& ctx, const Group& g, const char* send, char* recv, std::size_t count, DataType dt,
                       ReduceOp op) {
  const int p = g.size(), me = g.me;
  const std::size_t esz = dtype_size(dt), piece = ctx.shared_slot_bytes() / esz;
  std::vector<const char*> slot(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) slot[static_cast<std::size_t>(i)] = ctx.shared_slot(g.rank(i));
  char* own_slot = ctx.shared_slot(g.rank(me));
  const Buffers call{0, count * esz};
  for (std::size_t off = 0; off < count; off += piece) {
    const Blocks B{std::min(piece, count - off), p, 0};
    auto at = [&](int q) { return (off + B.begin(q)) * esz; };  // block q of this piece in send and recv
    for (int q = 0; q < p; ++q)
      if (q != me) std::memcpy(own_slot + B.begin(q) * esz, send + at(q), B.size(q) * esz);
    notify(ctx, g, Channel::single_copy, off == 0 ? &call : nullptr);
    // In place, dst is also the first operand: reduce(out, a, b) allows out == a.
    char* dst = recv + at(me);
    for (int k = 1; k < p; ++k) {
      const char* theirs = slot[static_cast<std::size_t>(direct_from(me, k, p))] + B.begin(me) * esz;
      kernels::reduce(dt, op, dst, k == 1 ? send + at(me) : dst, theirs, B.size(me));
    }
    if (op == ReduceOp::avg) kernels::finish_avg(dt, dst, B.size(me), p);
    std::memcpy(own_slot + B.begin(me) * esz, dst, B.size(me) * esz);
    notify(ctx, g, Channel::data2, nullptr);
    for (int q = 0; q < p; ++q)
      if (q != me) std::memcpy(recv + at(q), slot[static_cast<std::size_t>(q)] + B.begin(q) * esz, B.size(q) * esz);
    notify(ctx, g, Channel::result, nullptr);
  }
}

}  // namespace

void single_copy_allreduce(Context& ctx, const Group& g, const void* send, void* recv, std::size_t count,
                           DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt);
  if (g.size() == 1 || count == 0) return copy_if_distinct(recv, send, count * esz);
  segment_allreduce(ctx, g, static_cast<const char*>(send), static_cast<char*>(recv), count, dt, op);
}

void single_copy_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv, std::size_t recvcount,
                                DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt);
  if (g.size() == 1 || recvcount == 0) return copy_if_distinct(recv, send, recvcount * esz);
  const Blocks B{recvcount * static_cast<std::size_t>(g.size()), g.size(), recvcount};
  SingleCopy sc(ctx, g);
  sc.announce(send, recvcount * static_cast<std::size_t>(g.size()) * esz);
  // In place recv is send's own block: reduce(out, a, b) allows out == a.
  sc.reduce_mine(static_cast<const char*>(send), static_cast<char*>(recv), B, dt, op);
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
  sc.announce(send, block);
  sc.gather(out, B, dtype_size(dt));
  sc.release();
}

}  // namespace strata::collectives
