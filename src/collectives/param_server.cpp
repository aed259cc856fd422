// Parameter server with dedicated server processes, the worker's side (the server's is
// ps/shard_server.cpp). Every worker sends each server that server's shard of its vector; the
// server sums the shard over all workers and sends every worker the part it pulls.
//
// Against the ring, a worker's link carries the vector once each way instead of
// 2(p-1)/p of it, in two hops whatever p is, and the reduction runs on machines that
// are not training; the servers' links carry p/S vectors, so it pays once S approaches p
// (BytePS's argument). Every result element is computed by one server and copied to all
// workers, so results are bitwise identical across workers.
#include <algorithm>
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/ps_protocol.hpp"
#include "strata/errors.hpp"

namespace strata::collectives {

namespace {

Steps push_pull(Context& ctx, const Group& g, const void* send, void* recv, const ps::PushHeader& h) {
  const int S = static_cast<int>(g.servers.size());
  if (S == 0) throw InvalidArgument(ctx.what() + ": param_server needs dedicated servers (STRATA_SERVERS)");
  const ps::Layout L(h, g.size(), S);
  const std::size_t esz = L.element_size();
  const ps::Range mine = L.pull(g.me);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);  // holds `mine`, which starts at element mine.begin

  // Every receive is posted before anything is pushed, so results never wait in a queue.
  std::vector<ps::Reply> replies(static_cast<std::size_t>(S));
  std::vector<RequestPtr> reply_reqs, pulls, sends;
  std::vector<std::size_t> pull_bytes;
  for (int j = 0; j < S; ++j) {
    const int server = g.servers[static_cast<std::size_t>(j)];
    reply_reqs.push_back(ctx.recv_tagged(server, ps::tag(ps::Stream::reply), &replies[static_cast<std::size_t>(j)],
                                         sizeof(ps::Reply)));
    for (std::size_t c = 0; c < L.chunks(j); ++c) {
      const ps::Range piece = ps::intersect(L.chunk(j, c), mine);
      if (piece.size == 0) continue;
      pulls.push_back(ctx.recv_tagged(server, ps::tag(ps::Stream::pull), out + (piece.begin - mine.begin) * esz,
                                      piece.size * esz));
      pull_bytes.push_back(piece.size * esz);
    }
  }
  for (int j = 0; j < S; ++j)
    sends.push_back(ctx.send_tagged(g.servers[static_cast<std::size_t>(j)], ps::tag(ps::Stream::header), &h, sizeof h));
  // Chunk-major, so every server can start reducing its first chunk early.
  std::size_t most = 0;
  for (int j = 0; j < S; ++j) most = std::max(most, L.chunks(j));
  for (std::size_t c = 0; c < most; ++c)
    for (int j = 0; j < S; ++j) {
      if (c >= L.chunks(j)) continue;
      const ps::Range piece = L.chunk(j, c);
      sends.push_back(ctx.send_tagged(g.servers[static_cast<std::size_t>(j)], ps::tag(ps::Stream::push),
                                      in + piece.begin * esz, piece.size * esz));
    }

  co_await ctx.wait_all(reply_reqs);
  for (int j = 0; j < S; ++j) {
    const ps::Reply& r = replies[static_cast<std::size_t>(j)];
    ctx.expect_bytes(reply_reqs[static_cast<std::size_t>(j)], sizeof r);
    if (!r.ok)
      throw MismatchError(ctx.what() + " on rank " + std::to_string(g.rank(g.me)) + ": server " + std::to_string(j) +
                          " refused it: " + std::string(r.message, strnlen(r.message, sizeof r.message)));
  }
  co_await ctx.wait_all(pulls);
  for (std::size_t i = 0; i < pulls.size(); ++i) ctx.expect_bytes(pulls[i], pull_bytes[i]);
  co_await ctx.wait_all(sends);
}

ps::PushHeader header(const Context& ctx, ps::Op op, std::size_t count, DataType dt, ReduceOp reduce) {
  ps::PushHeader h;
  h.op = op;
  h.dtype = dt;
  h.reduce = reduce;
  h.seq = ctx.seq();
  h.count = count;
  h.chunk_bytes = ctx.chunk_bytes();
  return h;
}

}  // namespace

Steps param_server_allreduce(Context& ctx, const Group& g, const void* send, void* recv, std::size_t count,
                            DataType dt, ReduceOp op) {
  // Every worker agrees on the count (the fingerprint), so an empty call skips the
  // servers on all of them alike.
  if (count == 0) co_return;
  const ps::PushHeader h = header(ctx, ps::Op::allreduce, count, dt, op);
  co_await push_pull(ctx, g, send, recv, h);
}

Steps param_server_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv,
                                 std::size_t recvcount, DataType dt, ReduceOp op) {
  if (recvcount == 0) co_return;
  const ps::PushHeader h = header(ctx, ps::Op::reduce_scatter, recvcount * static_cast<std::size_t>(g.size()), dt, op);
  co_await push_pull(ctx, g, send, recv, h);
}

}  // namespace strata::collectives
