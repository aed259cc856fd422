// Recursive halving-doubling (Rabenseifner): a reduce-scatter by recursive halving, then
// an allgather by recursive doubling, each log2 p steps. Like the ring it moves only
// 2(p-1)/p of the vector per rank, but in log p rounds instead of p-1, so it also suits
// mid-sized messages.
//
// A group that is not a power of two folds first: each of the first p - p2 even ranks
// hands its data to its odd neighbour and waits; the odd one speaks for both (its virtual
// block covers both ranks' blocks) and hands the result back at the end.
//
// Every element's final value is computed by exactly one virtual rank, the owner of its
// block, and only copied after that, so all ranks hold the same bits.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"

namespace strata::collectives {

namespace {

// Element boundaries of the p2 virtual blocks: bounds[v] .. bounds[v + 1].
using Bounds = std::vector<std::size_t>;

struct Span {
  std::size_t begin = 0;  // elements
  std::size_t size = 0;
};

Span span_of(const Bounds& b, BlockRange r) {
  return {b[static_cast<std::size_t>(r.begin)], b[static_cast<std::size_t>(r.end)] - b[static_cast<std::size_t>(r.begin)]};
}

// The most any virtual rank keeps at halving step k (and at k + 2, k + 4, ...: less).
std::size_t largest_keep(const Bounds& b, int p2, int k) {
  std::size_t m = 0;
  if ((p2 >> (k + 1)) < 1) return 0;
  for (int v = 0; v < p2; ++v) m = std::max(m, span_of(b, halving_keep(v, k, p2)).size);
  return m;
}

// Sends len elements in chunks; the receiver cuts them the same way (recv_reduce).
void send_chunks(Context& ctx, int peer, Channel ch, const char* src, std::size_t len,
                 std::size_t esz, std::vector<RequestPtr>& sends) {
  const std::size_t C = chunk_count(len, esz, ctx.chunk_bytes());
  for (std::size_t c = 0; c < C; ++c)
    sends.push_back(ctx.send(peer, ch, src + piece_begin(len, C, c) * esz, piece_size(len, C, c) * esz));
}

// Receives len elements cut as send_chunks cuts them, into tmp.
std::vector<RequestPtr> post_chunks(Context& ctx, int peer, Channel ch, char* tmp, std::size_t len,
                                    std::size_t esz) {
  const std::size_t C = chunk_count(len, esz, ctx.chunk_bytes());
  std::vector<RequestPtr> recvs;
  for (std::size_t c = 0; c < C; ++c)
    recvs.push_back(ctx.recv(peer, ch, tmp + piece_begin(len, C, c) * esz, piece_size(len, C, c) * esz));
  return recvs;
}

// out = a op (what the posted receives bring into tmp), chunk by chunk so the reduction
// overlaps the transfer.
Steps reduce_chunks(Context& ctx, const std::vector<RequestPtr>& recvs, char* out, const char* a,
                   const char* tmp, std::size_t len, DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt), C = recvs.size();
  for (std::size_t c = 0; c < C; ++c) {
    co_await ctx.wait(recvs[c]);
    const std::size_t off = piece_begin(len, C, c) * esz, n = piece_size(len, C, c);
    ctx.expect_bytes(recvs[c], n * esz);
    kernels::reduce(dt, op, out + off, a + off, tmp + off, n);
  }
}

// tmp holds len elements.
Steps recv_reduce(Context& ctx, int peer, Channel ch, char* out, const char* a, char* tmp,
                 std::size_t len, DataType dt, ReduceOp op) {
  co_await reduce_chunks(ctx, post_chunks(ctx, peer, ch, tmp, len, dtype_size(dt)), out, a, tmp, len, dt, op);
}

Steps recv_exact(Context& ctx, int peer, Channel ch, void* dst, std::size_t bytes) {
  const auto r = ctx.recv(peer, ch, dst, bytes);
  co_await ctx.wait(r);
  ctx.expect_bytes(r, bytes);
}

// Recursive halving among the p2 >= 2 virtual ranks (the caller has folded). `cur` holds
// this rank's whole input; on return acc holds the reduction of block vr (op avg as sum).
// Blocks sent away are read from cur, so cur may be the caller's send buffer.
//
// Step k+1's receives are posted when step k starts, into the other of two staging
// slots: a partner that reaches step k+1 first finds them expected, where otherwise its
// bytes would be queued and copied a second time (TCP).
Steps halving(Context& ctx, const Group& g, const Bounds& b, const char* cur, char* acc,
             DataType dt, ReduceOp op) {
  const int p = g.size(), p2 = pow2_floor(p), vr = fold_vrank(g.me, p);
  const std::size_t esz = dtype_size(dt);
  char* slot[2] = {static_cast<char*>(ctx.scratch(0, largest_keep(b, p2, 0) * esz)),
                   static_cast<char*>(ctx.scratch(4, largest_keep(b, p2, 1) * esz))};
  auto peer_of = [&](int k) { return g.rank(fold_real(halving_partner(vr, k, p2), p)); };
  auto post = [&](int k) {
    const Span keep = span_of(b, halving_keep(vr, k, p2));
    return keep.size ? post_chunks(ctx, peer_of(k), Channel::data, slot[k % 2], keep.size, esz)
                     : std::vector<RequestPtr>{};
  };
  std::vector<RequestPtr> recvs = post(0);
  for (int k = 0; (p2 >> (k + 1)) >= 1; ++k) {
    const Span keep = span_of(b, halving_keep(vr, k, p2));
    const Span give = span_of(b, halving_send(vr, k, p2));
    // Both sides know both sizes, so empty halves (tiny counts) send nothing at all.
    std::vector<RequestPtr> sends;
    if (give.size) send_chunks(ctx, peer_of(k), Channel::data, cur + give.begin * esz, give.size, esz, sends);
    std::vector<RequestPtr> next;
    if ((p2 >> (k + 2)) >= 1) next = post(k + 1);
    if (keep.size) co_await reduce_chunks(ctx, recvs, acc + keep.begin * esz, cur + keep.begin * esz, slot[k % 2], keep.size, dt, op);
    co_await ctx.wait_all(sends);
    // From here on only the kept half is read, and that now lives in acc.
    cur = acc;
    recvs = std::move(next);
  }
}

// Recursive doubling among the p2 virtual ranks: buf holds block vr and gets all others.
// The receives land in place, so all are posted before the reduction starts (on their
// own channel, as the halving keeps receiving from the same peers); a block arrives
// only once its owner has it final, which needs this rank's part of it to have been
// sent and read.
class Doubling {
 public:
  Doubling(Context& ctx, const Group& g, const Bounds& b, char* buf, std::size_t esz)
      : ctx_(ctx), g_(g), b_(b), buf_(buf), esz_(esz), vr_(fold_vrank(g.me, g.size())) {
    for (int j = 0; (1 << j) < pow2_floor(g.size()); ++j) {
      const Span theirs = span_of(b, doubling_held(doubling_partner(vr_, j), j));
      recvs_.push_back(theirs.size ? ctx.recv(peer(j), Channel::data2, buf + theirs.begin * esz, theirs.size * esz)
                                   : RequestPtr{});
    }
  }

  Steps run() {
    std::vector<RequestPtr> sends;
    for (std::size_t j = 0; j < recvs_.size(); ++j) {
      const int step = static_cast<int>(j);
      const Span mine = span_of(b_, doubling_held(vr_, step));
      const Span theirs = span_of(b_, doubling_held(doubling_partner(vr_, step), step));
      if (mine.size) sends.push_back(ctx_.send(peer(step), Channel::data2, buf_ + mine.begin * esz_, mine.size * esz_));
      if (const auto& r = recvs_[j]) {
        co_await ctx_.wait(r);
        ctx_.expect_bytes(r, theirs.size * esz_);
      }
    }
    co_await ctx_.wait_all(sends);
  }

 private:
  int peer(int j) const { return g_.rank(fold_real(doubling_partner(vr_, j), g_.size())); }

  Context& ctx_;
  const Group& g_;
  const Bounds& b_;
  char* buf_;
  std::size_t esz_;
  int vr_;  // this rank's virtual rank among the p2
  std::vector<RequestPtr> recvs_;  // per doubling step; null where nothing comes
};

// Bounds for virtual blocks made of whole rank blocks of `block` elements each.
Bounds rank_block_bounds(int p, std::size_t block) {
  const int p2 = pow2_floor(p);
  Bounds b(static_cast<std::size_t>(p2) + 1);
  for (int v = 0; v <= p2; ++v) b[static_cast<std::size_t>(v)] = static_cast<std::size_t>(fold_first(v, p)) * block;
  return b;
}

}  // namespace

Steps halving_doubling_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                                std::size_t count, DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt), bytes = count * esz;
  const int p = g.size(), me = g.me;
  if (p == 1 || count == 0) co_return copy_if_distinct(recv, send, bytes);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  const int partner = fold_partner(me, p);
  if (partner >= 0 && me % 2 == 0) {
    std::vector<RequestPtr> sends;
    send_chunks(ctx, g.rank(partner), Channel::data, in, count, esz, sends);
    co_await ctx.wait_all(sends);
    {
      co_await recv_exact(ctx, g.rank(partner), Channel::result, out, bytes);
      co_return;
    }
  }
  if (partner >= 0) {
    co_await recv_reduce(ctx, g.rank(partner), Channel::data, out, in, static_cast<char*>(ctx.scratch(1, bytes)),
                count, dt, op);
    in = out;
  }
  const int p2 = pow2_floor(p), vr = fold_vrank(me, p);
  Bounds b(static_cast<std::size_t>(p2) + 1);
  for (int v = 0; v <= p2; ++v)
    b[static_cast<std::size_t>(v)] = piece_begin(count, static_cast<std::size_t>(p2), static_cast<std::size_t>(v));
  Doubling doubling(ctx, g, b, out, esz);
  co_await halving(ctx, g, b, in, out, dt, op);
  // One rank divides each block, before anyone copies it.
  const Span own = span_of(b, {vr, vr + 1});
  if (op == ReduceOp::avg && own.size) kernels::finish_avg(dt, out + own.begin * esz, own.size, p);
  co_await doubling.run();
  if (partner >= 0) co_await ctx.wait(ctx.send(g.rank(partner), Channel::result, out, bytes));
}

Steps halving_doubling_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                                     std::size_t recvcount, DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt), block = recvcount * esz;
  const int p = g.size(), me = g.me;
  if (p == 1 || recvcount == 0) co_return copy_if_distinct(recv, send, block);
  const std::size_t n = recvcount * static_cast<std::size_t>(p);
  const char* in = static_cast<const char*>(send);
  const int partner = fold_partner(me, p);
  if (partner >= 0 && me % 2 == 0) {
    std::vector<RequestPtr> sends;
    send_chunks(ctx, g.rank(partner), Channel::data, in, n, esz, sends);
    co_await ctx.wait_all(sends);
    {
      co_await recv_exact(ctx, g.rank(partner), Channel::result, recv, block);
      co_return;
    }
  }
  // Partial sums go to scratch: in place, recv lies inside send, which is still read.
  char* acc = static_cast<char*>(ctx.scratch(2, n * esz));
  if (partner >= 0) {
    co_await recv_reduce(ctx, g.rank(partner), Channel::data, acc, in, static_cast<char*>(ctx.scratch(1, n * esz)),
                n, dt, op);
    in = acc;
  }
  const Bounds b = rank_block_bounds(p, recvcount);
  const int vr = fold_vrank(me, p);
  co_await halving(ctx, g, b, in, acc, dt, op);
  // acc now holds this virtual rank's blocks: the partner's (if folded) and its own.
  const Span own = span_of(b, {vr, vr + 1});
  if (op == ReduceOp::avg) kernels::finish_avg(dt, acc + own.begin * esz, own.size, p);
  RequestPtr s;
  if (partner >= 0) s = ctx.send(g.rank(partner), Channel::result, acc + static_cast<std::size_t>(partner) * block, block);
  std::memcpy(recv, acc + static_cast<std::size_t>(me) * block, block);
  if (s) co_await ctx.wait(s);
}

Steps halving_doubling_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                                std::size_t sendcount, DataType dt) {
  const std::size_t esz = dtype_size(dt), block = sendcount * esz;
  const int p = g.size(), me = g.me;
  char* out = static_cast<char*>(recv);
  copy_if_distinct(out + static_cast<std::size_t>(me) * block, send, block);
  if (p == 1 || sendcount == 0) co_return;
  const std::size_t total = block * static_cast<std::size_t>(p);
  const int partner = fold_partner(me, p);
  if (partner >= 0 && me % 2 == 0) {
    co_await ctx.wait(ctx.send(g.rank(partner), Channel::data, out + static_cast<std::size_t>(me) * block, block));
    // The whole vector comes back, this rank's own block included (same bits).
    {
      co_await recv_exact(ctx, g.rank(partner), Channel::result, out, total);
      co_return;
    }
  }
  const Bounds b = rank_block_bounds(p, sendcount);
  Doubling doubling(ctx, g, b, out, esz);
  if (partner >= 0)
    co_await recv_exact(ctx, g.rank(partner), Channel::data, out + static_cast<std::size_t>(partner) * block, block);
  co_await doubling.run();
  if (partner >= 0) co_await ctx.wait(ctx.send(g.rank(partner), Channel::result, out, total));
}

}  // namespace strata::collectives
