// Pipelined double binary tree (the idea of NCCL 2.4's trees): the vector is cut in two
// halves, each reduced up one binary tree and broadcast back down it, chunk by chunk, so
// a chunk travels down while later ones still climb. The trees' interiors are disjoint
// (patterns.hpp), so every rank forwards for at most one of them and the two halves
// share each link's bandwidth evenly. Latency grows with log2 p instead of p.
//
// A chunk's final value is computed once, at its tree's root, and only copied after that,
// so all ranks hold the same bits.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"

namespace strata::collectives {

namespace {

// One tree's half of the vector as it passes through this rank.
struct Half {
  Channel ch = Channel::data;
  int parent = -1;          // transport rank; -1 at an allreduce tree's root
  int children[2] = {-1, -1};
  int nchild = 0;
  std::size_t begin = 0;    // elements of the vector
  std::size_t len = 0;
  std::size_t chunks = 0;   // 0 when the half is empty: nothing moves at all
  char* staging = nullptr;  // nchild * len elements: the children's partial sums
  std::vector<RequestPtr> from_child[2];
  std::vector<RequestPtr> from_parent;
  bool reduce_up = true;  // false in a broadcast: chunks only come down from the parent

  std::size_t off(std::size_t c) const { return begin + piece_begin(len, chunks, c); }
  std::size_t size(std::size_t c) const { return piece_size(len, chunks, c); }
};

class Pipeline {
 public:
  Pipeline(Context& ctx, const char* send, char* recv, DataType dt, ReduceOp op, int p)
      : ctx_(ctx), send_(send), recv_(recv), dt_(dt), op_(op), p_(p), esz_(dtype_size(dt)) {}

  // Cuts [begin, begin + len) into chunks and posts every receive of the half.
  // reduce_up false: a broadcast, where chunks only come down from the parent.
  void add(Half h, bool reduce_up, int staging_slot) {
    if (h.len == 0) return;
    h.chunks = chunk_count(h.len, esz_, ctx_.chunk_bytes());
    h.reduce_up = reduce_up;
    if (reduce_up && h.nchild)
      h.staging = static_cast<char*>(ctx_.scratch(staging_slot, static_cast<std::size_t>(h.nchild) * h.len * esz_));
    for (int i = 0; i < (reduce_up ? h.nchild : 0); ++i)
      for (std::size_t c = 0; c < h.chunks; ++c)
        h.from_child[i].push_back(ctx_.recv(h.children[i], h.ch, stage(h, i, c), h.size(c) * esz_));
    // Final values land in place; the partial sum that sat there has left by then,
    // since the parent only sends a chunk down after it received this rank's.
    if (h.parent >= 0)
      for (std::size_t c = 0; c < h.chunks; ++c)
        h.from_parent.push_back(ctx_.recv(h.parent, h.ch, recv_ + h.off(c) * esz_, h.size(c) * esz_));
    halves_.push_back(std::move(h));
  }

  // Each half moves up and down as two pieces of work in flight, each in chunk order
  // (each link is one FIFO stream): a chunk goes up as soon as the children's parts of
  // it are in, and down as soon as the parent's result is.
  Steps run() {
    std::vector<Steps> work;
    for (auto& h : halves_) {
      if (h.reduce_up) work.push_back(up(h));
      if (h.parent >= 0) work.push_back(down(h));
    }
    for (auto& w : work) ctx_.start(w);
    for (auto& w : work) co_await w;
    co_await ctx_.wait_all(std::move(sends_));
  }

 private:
  char* stage(const Half& h, int child, std::size_t c) const {
    return h.staging + (static_cast<std::size_t>(child) * h.len + piece_begin(h.len, h.chunks, c)) * esz_;
  }
  void pass_down(const Half& h, std::size_t c, const char* data) {
    for (int i = 0; i < h.nchild; ++i) sends_.push_back(ctx_.send(h.children[i], h.ch, data, h.size(c) * esz_));
  }
  Steps up(Half& h) {
    for (std::size_t c = 0; c < h.chunks; ++c) {
      const std::size_t n = h.size(c), off = h.off(c) * esz_;
      const char* partial = send_ + off;
      if (h.nchild) {
        char* dst = recv_ + off;
        for (int i = 0; i < h.nchild; ++i) {
          co_await ctx_.wait(h.from_child[i][c]);
          ctx_.expect_bytes(h.from_child[i][c], n * esz_);
          kernels::reduce(dt_, op_, dst, i == 0 ? send_ + off : dst, stage(h, i, c), n);
        }
        partial = dst;
      }
      if (h.parent >= 0) {
        sends_.push_back(ctx_.send(h.parent, h.ch, partial, n * esz_));
      } else {
        if (op_ == ReduceOp::avg) kernels::finish_avg(dt_, recv_ + off, n, p_);
        pass_down(h, c, recv_ + off);
      }
    }
  }
  Steps down(Half& h) {
    for (std::size_t c = 0; c < h.chunks; ++c) {
      co_await ctx_.wait(h.from_parent[c]);
      ctx_.expect_bytes(h.from_parent[c], h.size(c) * esz_);
      pass_down(h, c, recv_ + h.off(c) * esz_);
    }
  }

  Context& ctx_;
  const char* send_;
  char* recv_;
  DataType dt_;
  ReduceOp op_;
  int p_;
  std::size_t esz_;
  std::vector<Half> halves_;
  std::vector<RequestPtr> sends_;
};

// Tree t over `q` nodes, as seen by node `me`; `real` maps a tree index to a transport rank.
template <class Real>
Half tree_half(int t, int me, int q, Real real) {
  Half h;
  h.ch = t == 0 ? Channel::data : Channel::data2;
  const int up = dtree_parent(me, t, q);
  h.parent = up < 0 ? -1 : real(up);
  for (int c = 0; c < 2; ++c) {
    const int child = dtree_child(me, t, c, q);
    if (child >= 0) h.children[h.nchild++] = real(child);
  }
  return h;
}

}  // namespace

Steps double_tree_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                           std::size_t count, DataType dt, ReduceOp op) {
  const int p = g.size();
  if (p == 1 || count == 0) co_return copy_if_distinct(recv, send, count * dtype_size(dt));
  Pipeline pipe(ctx, static_cast<const char*>(send), static_cast<char*>(recv), dt, op, p);
  for (int t = 0; t < 2; ++t) {
    Half h = tree_half(t, g.me, p, [&](int i) { return g.rank(i); });
    h.begin = piece_begin(count, 2, static_cast<std::size_t>(t));
    h.len = piece_size(count, 2, static_cast<std::size_t>(t));
    pipe.add(std::move(h), true, t);
  }
  co_await pipe.run();
}

// The root feeds each half to the root of its tree; the trees span the other p - 1
// ranks, so the root sends the vector once and every other rank forwards at most once.
Steps double_tree_broadcast(Context& ctx, const Group& g, const void* send, void* recv,
                           std::size_t count, DataType dt, int root) {
  const int p = g.size();
  const std::size_t esz = dtype_size(dt);
  if (p == 1 || count == 0) {
    if (g.me == root) copy_if_distinct(recv, send, count * esz);
    co_return;
  }
  const int q = p - 1;  // tree index i is group index root + 1 + i
  auto real = [&](int i) { return g.rank(mod(root + 1 + i, p)); };
  if (g.me == root) {
    const char* src = static_cast<const char*>(send);
    std::vector<RequestPtr> sends;
    for (int t = 0; t < 2; ++t) {
      const std::size_t begin = piece_begin(count, 2, static_cast<std::size_t>(t));
      const std::size_t len = piece_size(count, 2, static_cast<std::size_t>(t));
      if (len == 0) continue;
      const std::size_t C = chunk_count(len, esz, ctx.chunk_bytes());
      const int top = real(dtree_index(btree_root(q), t, q));
      for (std::size_t c = 0; c < C; ++c)
        sends.push_back(ctx.send(top, t == 0 ? Channel::data : Channel::data2,
                                 src + (begin + piece_begin(len, C, c)) * esz, piece_size(len, C, c) * esz));
    }
    copy_if_distinct(recv, send, count * esz);  // overlaps the sends already on their way
    co_await ctx.wait_all(std::move(sends));
    co_return;
  }
  Pipeline pipe(ctx, nullptr, static_cast<char*>(recv), dt, ReduceOp::sum, p);
  const int me = mod(g.me - root, p) - 1;
  for (int t = 0; t < 2; ++t) {
    Half h = tree_half(t, me, q, real);
    if (h.parent < 0) h.parent = g.rank(root);
    h.begin = piece_begin(count, 2, static_cast<std::size_t>(t));
    h.len = piece_size(count, 2, static_cast<std::size_t>(t));
    pipe.add(std::move(h), false, t);
  }
  co_await pipe.run();
}

}  // namespace strata::collectives
