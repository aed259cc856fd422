// Ring reduce-scatter and allgather, and the collectives built from them.
//
// Both phases are pipelined in chunks: a chunk received and reduced at step k is sent on
// at step k+1 at once, so a step does not wait for the whole previous one. Receives of
// step k+2 reuse step k's staging slot chunk by chunk, which keeps FIFO order per tag.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"

namespace strata::collectives {

namespace {

struct Layout {
  std::size_t n = 0;       // elements over all segments
  int p = 1;
  std::size_t esz = 1;
  std::size_t chunks = 1;  // per segment, equal for every segment
  std::size_t stride = 0;  // elements reserved per chunk in a staging slot

  Layout(std::size_t n_, int p_, DataType dt, std::size_t chunk_bytes)
      : n(n_), p(p_), esz(dtype_size(dt)) {
    const std::size_t max_seg = piece_size(n, static_cast<std::size_t>(p), 0);
    chunks = chunk_count(max_seg, esz, chunk_bytes);
    stride = (max_seg + chunks - 1) / chunks;
  }
  std::size_t seg_begin(int s) const { return piece_begin(n, static_cast<std::size_t>(p), static_cast<std::size_t>(s)); }
  std::size_t seg_size(int s) const { return piece_size(n, static_cast<std::size_t>(p), static_cast<std::size_t>(s)); }
  // Offset and length (elements) of chunk c within segment s.
  std::size_t chunk_off(int s, std::size_t c) const { return piece_begin(seg_size(s), chunks, c); }
  std::size_t chunk_len(int s, std::size_t c) const { return piece_size(seg_size(s), chunks, c); }
};

// Leaves the fully reduced segment ring_rs_final_seg(me, shift) at out(that segment).
// out(s) is where segment s's partial sums go; each segment is written once per rank.
template <class Out>
Steps reduce_scatter_core(Context& ctx, const Group& g, const char* send, const Layout& L,
                          DataType dt, ReduceOp op, int shift, Out out, Channel ch = Channel::data) {
  const int p = g.size(), me = g.me;
  const std::size_t C = L.chunks, esz = L.esz;
  char* slot[2] = {static_cast<char*>(ctx.scratch(0, C * L.stride * esz)),
                   static_cast<char*>(ctx.scratch(1, C * L.stride * esz))};
  const int next = g.rank(mod(me + 1, p)), prev = g.rank(mod(me - 1, p));
  std::vector<RequestPtr> recvs(static_cast<std::size_t>(p - 1) * C);
  std::vector<RequestPtr> sends;
  sends.reserve(recvs.size());

  auto post_recv = [&](int k, std::size_t c) {
    const int s = ring_rs_recv_seg(me, shift, k, p);
    recvs[static_cast<std::size_t>(k) * C + c] =
        ctx.recv(prev, ch, slot[k % 2] + c * L.stride * esz, L.chunk_len(s, c) * esz);
  };
  auto post_send = [&](int k, std::size_t c, const char* seg_base) {
    const int s = ring_rs_send_seg(me, shift, k, p);
    sends.push_back(ctx.send(next, ch, seg_base + L.chunk_off(s, c) * esz,
                             L.chunk_len(s, c) * esz));
  };

  for (int k = 0; k < std::min(2, p - 1); ++k)
    for (std::size_t c = 0; c < C; ++c) post_recv(k, c);
  const int first = ring_rs_send_seg(me, shift, 0, p);
  for (std::size_t c = 0; c < C; ++c) post_send(0, c, send + L.seg_begin(first) * esz);

  for (int k = 0; k < p - 1; ++k) {
    const int s = ring_rs_recv_seg(me, shift, k, p);
    char* dst = out(s);
    const char* mine = send + L.seg_begin(s) * esz;
    for (std::size_t c = 0; c < C; ++c) {
      const auto& r = recvs[static_cast<std::size_t>(k) * C + c];
      co_await ctx.wait(r);
      const std::size_t off = L.chunk_off(s, c) * esz, len = L.chunk_len(s, c);
      ctx.expect_bytes(r, len * esz);
      kernels::reduce(dt, op, dst + off, mine + off, slot[k % 2] + c * L.stride * esz, len);
      if (k + 2 < p - 1) post_recv(k + 2, c);
      if (k + 1 < p - 1) post_send(k + 1, c, dst);
    }
  }
  co_await ctx.wait_all(std::move(sends));
}

// Every rank holds segment `own` of buf (own = me + constant); fills in all the others.
// Received chunks land in place, so every receive is posted when the phase is created:
// an allreduce creates it before its reduce-scatter, so that a neighbour that finishes
// first finds its allgather chunks expected rather than queued (on TCP an unexpected
// message costs a second copy). It then needs its own channel, as the reduce-scatter
// keeps posting receives from the same neighbour. A final segment can only arrive after
// this rank's own reads and writes of it in the reduce-scatter are over: its value
// needs this rank's contribution to have gone round the ring first.
class AllgatherPhase {
 public:
  AllgatherPhase(Context& ctx, const Group& g, char* buf, const Layout& L, int own, Channel ch)
      : ctx_(ctx), g_(g), buf_(buf), L_(L), own_(own), ch_(ch) {
    const int p = g.size();
    recvs_.resize(static_cast<std::size_t>(p - 1) * L.chunks);
    for (int k = 0; k < p - 1; ++k) {
      const int s = ring_ag_recv_seg(own, k, p);
      for (std::size_t c = 0; c < L.chunks; ++c)
        recvs_[static_cast<std::size_t>(k) * L.chunks + c] =
            ctx.recv(g.rank(mod(g.me - 1, p)), ch, chunk_ptr(s, c), L.chunk_len(s, c) * L.esz);
    }
  }

  Steps run() {
    const int p = g_.size();
    const std::size_t C = L_.chunks, esz = L_.esz;
    const int next = g_.rank(mod(g_.me + 1, p));
    std::vector<RequestPtr> sends;
    sends.reserve(recvs_.size());
    for (std::size_t c = 0; c < C; ++c)
      sends.push_back(ctx_.send(next, ch_, chunk_ptr(own_, c), L_.chunk_len(own_, c) * esz));
    for (int k = 0; k < p - 1; ++k) {
      const int s = ring_ag_recv_seg(own_, k, p);
      for (std::size_t c = 0; c < C; ++c) {
        const auto& r = recvs_[static_cast<std::size_t>(k) * C + c];
        co_await ctx_.wait(r);
        ctx_.expect_bytes(r, L_.chunk_len(s, c) * esz);
        if (k + 1 < p - 1) sends.push_back(ctx_.send(next, ch_, chunk_ptr(s, c), L_.chunk_len(s, c) * esz));
      }
    }
    co_await ctx_.wait_all(std::move(sends));
  }

 private:
  char* chunk_ptr(int s, std::size_t c) const { return buf_ + (L_.seg_begin(s) + L_.chunk_off(s, c)) * L_.esz; }

  Context& ctx_;
  const Group& g_;
  char* buf_;
  const Layout& L_;
  int own_;
  Channel ch_;
  std::vector<RequestPtr> recvs_;
};

Steps allgather_core(Context& ctx, const Group& g, char* buf, const Layout& L, int own, Channel ch = Channel::data) {
  AllgatherPhase phase(ctx, g, buf, L, own, ch);
  co_await phase.run();
}

}  // namespace

Steps ring_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                     std::size_t count, DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt);
  if (g.size() == 1 || count == 0) co_return copy_if_distinct(recv, send, count * esz);
  const Layout L(count, g.size(), dt, ctx.chunk_bytes());
  char* out = static_cast<char*>(recv);
  const int own = ring_rs_final_seg(g.me, 0, g.size());
  AllgatherPhase allgather(ctx, g, out, L, own, Channel::data2);
  co_await reduce_scatter_core(ctx, g, static_cast<const char*>(send), L, dt, op, 0,
                               [&](int s) { return out + L.seg_begin(s) * esz; });
  // Dividing before the allgather means one rank divides each segment: all ranks then
  // hold the same bits, and the work is 1/p of the vector.
  if (op == ReduceOp::avg) kernels::finish_avg(dt, out + L.seg_begin(own) * esz, L.seg_size(own), g.size());
  co_await allgather.run();
}

Steps ring_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                          std::size_t recvcount, DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt);
  if (g.size() == 1 || recvcount == 0) co_return copy_if_distinct(recv, send, recvcount * esz);
  const std::size_t n = recvcount * static_cast<std::size_t>(g.size());
  const Layout L(n, g.size(), dt, ctx.chunk_bytes());
  char* partial = static_cast<char*>(ctx.scratch(2, n * esz));
  co_await reduce_scatter_core(ctx, g, static_cast<const char*>(send), L, dt, op, -1, [&](int s) {
    return s == g.me ? static_cast<char*>(recv) : partial + L.seg_begin(s) * esz;
  });
  if (op == ReduceOp::avg) kernels::finish_avg(dt, recv, recvcount, g.size());
}

Steps ring_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                     std::size_t sendcount, DataType dt) {
  const std::size_t esz = dtype_size(dt);
  char* out = static_cast<char*>(recv);
  copy_if_distinct(out + static_cast<std::size_t>(g.me) * sendcount * esz, send, sendcount * esz);
  if (g.size() == 1 || sendcount == 0) co_return;
  const Layout L(sendcount * static_cast<std::size_t>(g.size()), g.size(), dt, ctx.chunk_bytes());
  co_await allgather_core(ctx, g, out, L, g.me);
}

Steps ring_reduce_scatter_pieces(Context& ctx, const Group& g, const void* send, void* recv,
                                 std::size_t n, DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt);
  if (g.size() == 1 || n == 0) co_return copy_if_distinct(recv, send, n * esz);
  const Layout L(n, g.size(), dt, ctx.chunk_bytes());
  char* out = static_cast<char*>(recv);
  co_await reduce_scatter_core(ctx, g, static_cast<const char*>(send), L, dt, op, -1,
                               [&](int s) { return out + L.seg_begin(s) * esz; });
}

Steps ring_allgather_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt) {
  if (g.size() == 1 || n == 0) co_return;
  const Layout L(n, g.size(), dt, ctx.chunk_bytes());
  // On a channel of its own, apart from ring_reduce_scatter_pieces': a pipelined plan
  // interleaves the two across segments as far as its stages in flight let it, which each
  // rank decides from its own link, so each kind alone keeps the same order on every rank.
  co_await allgather_core(ctx, g, static_cast<char*>(buf), L, g.me, Channel::data2);
}

namespace {

// Two members: each sends the other its whole vector and reduces the pair itself, in group
// order (position 0's operand first), so both end with the same bits. The ring's bytes in
// one step instead of two: across a WAN, one one-way delay per stage instead of two.
Steps pair_allreduce_pieces(Context& ctx, const Group& g, char* out, std::size_t n, DataType dt, ReduceOp op,
                            Channel ch, int avg_divisor) {
  const std::size_t esz = dtype_size(dt);
  const std::size_t C = chunk_count(n, esz, ctx.chunk_bytes());
  char* theirs = static_cast<char*>(ctx.scratch(0, n * esz));
  const int peer = g.rank(1 - g.me);
  std::vector<RequestPtr> recvs, sends;
  recvs.reserve(C);
  sends.reserve(C);
  for (std::size_t c = 0; c < C; ++c)
    recvs.push_back(ctx.recv(peer, ch, theirs + piece_begin(n, C, c) * esz, piece_size(n, C, c) * esz));
  for (std::size_t c = 0; c < C; ++c)
    sends.push_back(ctx.send(peer, ch, out + piece_begin(n, C, c) * esz, piece_size(n, C, c) * esz));
  for (std::size_t c = 0; c < C; ++c) {
    const std::size_t off = piece_begin(n, C, c) * esz, len = piece_size(n, C, c);
    co_await ctx.wait(recvs[c], sends[c]);  // the result overwrites what this send reads
    ctx.expect_bytes(recvs[c], len * esz);
    if (g.me == 0) kernels::reduce(dt, op, out + off, out + off, theirs + off, len);
    else kernels::reduce(dt, op, out + off, theirs + off, out + off, len);
  }
  if (avg_divisor > 0) kernels::finish_avg(dt, out, n, avg_divisor);
}

}  // namespace

Steps ring_allreduce_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt,
                            ReduceOp op, Channel ch, int avg_divisor) {
  char* out = static_cast<char*>(buf);
  const std::size_t esz = dtype_size(dt);
  if (g.size() == 1 || n == 0) {
    if (avg_divisor > 0) kernels::finish_avg(dt, buf, n, avg_divisor);
    co_return;
  }
  if (g.size() == 2) {
    co_await pair_allreduce_pieces(ctx, g, out, n, dt, op, ch, avg_divisor);
    co_return;
  }
  const Layout L(n, g.size(), dt, ctx.chunk_bytes());
  co_await reduce_scatter_core(ctx, g, out, L, dt, op, -1, [&](int s) { return out + L.seg_begin(s) * esz; }, ch);
  if (avg_divisor > 0) kernels::finish_avg(dt, out + L.seg_begin(g.me) * esz, L.seg_size(g.me), avg_divisor);
  // The allgather's receives are posted only now, behind the reduce-scatter's on the same
  // channel; it writes into pieces this rank sent from, whose sends are all done.
  co_await allgather_core(ctx, g, out, L, g.me, ch);
}

Steps ring_reduce(Context& ctx, const Group& g, const void* send, void* recv, std::size_t count,
                  DataType dt, ReduceOp op, int root) {
  const std::size_t esz = dtype_size(dt);
  const bool is_root = g.me == root;
  if (g.size() == 1 || count == 0) {
    if (is_root) copy_if_distinct(recv, send, count * esz);
    co_return;
  }
  const Layout L(count, g.size(), dt, ctx.chunk_bytes());
  char* base = is_root ? static_cast<char*>(recv) : static_cast<char*>(ctx.scratch(2, count * esz));
  co_await reduce_scatter_core(ctx, g, static_cast<const char*>(send), L, dt, op, -1,
                               [&](int s) { return base + L.seg_begin(s) * esz; });
  if (op == ReduceOp::avg) kernels::finish_avg(dt, base + L.seg_begin(g.me) * esz, L.seg_size(g.me), g.size());
  if (!is_root) {
    co_await ctx.wait(ctx.send(g.rank(root), Channel::result, base + L.seg_begin(g.me) * esz,
                               L.seg_size(g.me) * esz));
    co_return;
  }
  std::vector<RequestPtr> recvs;
  for (int s = 0; s < g.size(); ++s)
    if (s != g.me)
      recvs.push_back(ctx.recv(g.rank(s), Channel::result, base + L.seg_begin(s) * esz,
                               L.seg_size(s) * esz));
  co_await ctx.wait_all(std::move(recvs));
}

}  // namespace strata::collectives
