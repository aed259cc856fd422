// Direct exchange, the colocated parameter server: every rank owns one block, receives
// that block from all others at once, reduces it, and sends the result back to all of
// them. Two rounds whatever p is, and 2(p-1)/p of the vector per rank like the ring,
// but over p-1 concurrent flows, which suits fabrics with full bisection and many paths.
//
// Each block's final value is computed by its owner alone, and the reduction is chunked
// so that the first chunks fan back out while later ones are still being reduced.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"

namespace strata::collectives {

namespace {

// Receives this rank's block from every peer and reduces it into out (the block's
// size), calling on_chunk(offset, length) in elements as each chunk is final (op avg
// divided already). Sends every other block of `send` to its owner.
template <class OnChunk>
Steps scatter_reduce(Context& ctx, const Group& g, const char* send, char* out, const Blocks& B,
                    DataType dt, ReduceOp op, OnChunk on_chunk) {
  const int p = g.size(), me = g.me;
  const std::size_t esz = dtype_size(dt), mine = B.size(me);
  const std::size_t C = chunk_count(B.size(0), esz, ctx.chunk_bytes());  // same on every rank
  char* staging = static_cast<char*>(ctx.scratch(0, static_cast<std::size_t>(p - 1) * mine * esz));
  auto slot = [&](int k) { return staging + static_cast<std::size_t>(k - 1) * mine * esz; };
  std::vector<RequestPtr> recvs(static_cast<std::size_t>(p - 1) * C), sends;
  if (mine)
    for (std::size_t c = 0; c < C; ++c)
      for (int k = 1; k < p; ++k)
        recvs[static_cast<std::size_t>(k - 1) * C + c] =
            ctx.recv(g.rank(direct_from(me, k, p)), Channel::data, slot(k) + piece_begin(mine, C, c) * esz,
                     piece_size(mine, C, c) * esz);
  // Chunk-major, so every owner gets its first chunk early.
  for (std::size_t c = 0; c < C; ++c)
    for (int k = 1; k < p; ++k) {
      const int to = direct_to(me, k, p);
      const std::size_t len = B.size(to);
      if (len)
        sends.push_back(ctx.send(g.rank(to), Channel::data, send + (B.begin(to) + piece_begin(len, C, c)) * esz,
                                 piece_size(len, C, c) * esz));
    }
  const char* own = send + B.begin(me) * esz;
  for (std::size_t c = 0; mine && c < C; ++c) {
    const std::size_t off = piece_begin(mine, C, c), len = piece_size(mine, C, c);
    // A fixed order (nearest sender first), so repeated runs give the same bits too.
    for (int k = 1; k < p; ++k) {
      const auto& r = recvs[static_cast<std::size_t>(k - 1) * C + c];
      co_await ctx.wait(r);
      ctx.expect_bytes(r, len * esz);
      kernels::reduce(dt, op, out + off * esz, k == 1 ? own + off * esz : out + off * esz, slot(k) + off * esz, len);
    }
    if (op == ReduceOp::avg) kernels::finish_avg(dt, out + off * esz, len, p);
    on_chunk(off, len);
  }
  co_await ctx.wait_all(sends);
}

}  // namespace

Steps direct_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                      std::size_t count, DataType dt, ReduceOp op) {
  const int p = g.size(), me = g.me;
  const std::size_t esz = dtype_size(dt);
  if (p == 1 || count == 0) co_return copy_if_distinct(recv, send, count * esz);
  const Blocks B{count, p, 0};
  char* out = static_cast<char*>(recv);
  const std::size_t C = chunk_count(B.size(0), esz, ctx.chunk_bytes());
  // Final blocks land in place. In place, recv block s is also the send buffer block s
  // went out from; its owner only answers after it received it, so no bytes collide.
  std::vector<RequestPtr> results, sends;
  for (int k = 1; k < p; ++k) {
    const int from = direct_from(me, k, p);
    const std::size_t len = B.size(from);
    for (std::size_t c = 0; len && c < C; ++c)
      results.push_back(ctx.recv(g.rank(from), Channel::result, out + (B.begin(from) + piece_begin(len, C, c)) * esz,
                                 piece_size(len, C, c) * esz));
  }
  char* mine = out + B.begin(me) * esz;
  co_await scatter_reduce(ctx, g, static_cast<const char*>(send), mine, B, dt, op, [&](std::size_t off, std::size_t len) {
    for (int k = 1; k < p; ++k)
      sends.push_back(ctx.send(g.rank(direct_to(me, k, p)), Channel::result, mine + off * esz, len * esz));
  });
  co_await ctx.wait_all(results);
  for (int k = 1, i = 0; k < p; ++k) {
    const std::size_t len = B.size(direct_from(me, k, p));
    for (std::size_t c = 0; len && c < C; ++c) ctx.expect_bytes(results[static_cast<std::size_t>(i++)], piece_size(len, C, c) * esz);
  }
  co_await ctx.wait_all(sends);
}

Steps direct_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                           std::size_t recvcount, DataType dt, ReduceOp op) {
  const int p = g.size();
  if (p == 1 || recvcount == 0) co_return copy_if_distinct(recv, send, recvcount * dtype_size(dt));
  const Blocks B{recvcount * static_cast<std::size_t>(p), p, recvcount};
  // In place recv is send's own block: reduce(out, a, b) allows out == a.
  co_await scatter_reduce(ctx, g, static_cast<const char*>(send), static_cast<char*>(recv), B, dt, op,
                 [](std::size_t, std::size_t) {});
}

Steps direct_allgather(Context& ctx, const Group& g, const void* send, void* recv,
                      std::size_t sendcount, DataType dt) {
  const int p = g.size(), me = g.me;
  const std::size_t block = sendcount * dtype_size(dt);
  char* out = static_cast<char*>(recv);
  copy_if_distinct(out + static_cast<std::size_t>(me) * block, send, block);
  if (p == 1 || sendcount == 0) co_return;
  std::vector<RequestPtr> recvs, sends;
  for (int k = 1; k < p; ++k) {
    const int from = direct_from(me, k, p);
    recvs.push_back(ctx.recv(g.rank(from), Channel::data, out + static_cast<std::size_t>(from) * block, block));
  }
  for (int k = 1; k < p; ++k)
    sends.push_back(ctx.send(g.rank(direct_to(me, k, p)), Channel::data, out + static_cast<std::size_t>(me) * block, block));
  co_await ctx.wait_all(recvs);
  for (const auto& r : recvs) ctx.expect_bytes(r, block);
  co_await ctx.wait_all(sends);
}

}  // namespace strata::collectives
