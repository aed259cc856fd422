// One-round allreduce (and barrier): every rank sends its vector to every other and reduces all p
// vectors itself, in group order (position 0's first), so every rank applies the same
// operations to the same operands and ends with the same bits. One latency where
// recursive doubling pays log2 p (three rounds for p = 3) and direct two, at p - 1 times
// the bytes: the choice for small messages over long links, the region stage across a WAN
// above all, where a round costs milliseconds and the bytes cost nothing.
//
// Larger vectors go in chunks of ctx.chunk_bytes(), one round each, so scratch stays
// p chunks whatever the count; the cost model prices those rounds and keeps the algorithm
// to where one or a few of them suffice.
//
// The communicator's ring check of fingerprints sees only a rank's predecessor, and here
// every rank's data is out in the first round, before a mismatch found elsewhere could
// hold any back: so every rank also sends its call's stamp to every other, ahead of its
// data, and checks all of them before it uses a byte. Its messages travel on channels no
// other algorithm uses: a rank that called, say, a broadcast instead would otherwise take
// this one's first-round data as its own and return as if nothing were wrong.
#include <algorithm>
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"

namespace strata::collectives {

Steps exchange_allreduce(Context& ctx, const Group& g, const void* send, void* recv, std::size_t count,
                        DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt);
  const int p = g.size(), me = g.me;
  if (p == 1 || count == 0) co_return copy_if_distinct(recv, send, count * esz);
  const std::size_t C = chunk_count(count, esz, ctx.chunk_bytes());  // the same on every rank
  const std::size_t most = piece_size(count, C, 0) * esz;
  // Slot q holds position q's chunk; this rank's own is read from `send` unless the call
  // is in place, where the result overwrites it before later operands are applied.
  char* slots = static_cast<char*>(ctx.scratch(0, static_cast<std::size_t>(p) * most));
  auto slot = [&](int q) { return slots + static_cast<std::size_t>(q) * most; };
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  std::vector<RequestPtr> reqs;
  const std::string& stamp = ctx.stamp();
  std::vector<std::string> theirs(static_cast<std::size_t>(p));
  std::vector<RequestPtr> stamps;
  if (!stamp.empty()) {
    for (int k = 1; k < p; ++k) {
      const int from = direct_from(me, k, p);
      theirs[static_cast<std::size_t>(from)].resize(stamp.size());
      stamps.push_back(ctx.recv(g.rank(from), Channel::exchange_stamp, theirs[static_cast<std::size_t>(from)].data(), stamp.size()));
    }
    for (int k = 1; k < p; ++k) stamps.push_back(ctx.send(g.rank(direct_to(me, k, p)), Channel::exchange_stamp, stamp.data(), stamp.size()));
  }
  for (std::size_t c = 0; c < C; ++c) {
    const std::size_t off = piece_begin(count, C, c) * esz, len = piece_size(count, C, c) * esz;
    reqs.clear();
    for (int k = 1; k < p; ++k) {
      const int from = direct_from(me, k, p);
      reqs.push_back(ctx.recv(g.rank(from), Channel::exchange, slot(from), len));
    }
    for (int k = 1; k < p; ++k) reqs.push_back(ctx.send(g.rank(direct_to(me, k, p)), Channel::exchange, in + off, len));
    if (c == 0 && !stamps.empty()) {
      co_await ctx.wait_all(stamps);  // they travel ahead of the data: no round of their own
      for (int q = 0; q < p; ++q)
        if (q != me) ctx.check_stamp(g.rank(q), theirs[static_cast<std::size_t>(q)]);
    }
    co_await ctx.wait_all(reqs);
    for (int k = 0; k < p - 1; ++k) ctx.expect_bytes(reqs[static_cast<std::size_t>(k)], len);
    const char* own = in + off;
    if (in == out) own = static_cast<const char*>(std::memcpy(slot(me), in + off, len));
    auto operand = [&](int q) { return q == me ? own : static_cast<const char*>(slot(q)); };
    const std::size_t n = len / esz;
    kernels::reduce(dt, op, out + off, operand(0), operand(1), n);
    for (int q = 2; q < p; ++q) kernels::reduce(dt, op, out + off, out + off, operand(q), n);
    if (op == ReduceOp::avg) kernels::finish_avg(dt, out + off, n, p);
  }
}

Steps exchange_barrier(Context& ctx, const Group& g) {
  const int p = g.size(), me = g.me;
  if (p == 1) co_return;
  // The messages carry the call's stamp, so a barrier met by another collective is named
  // here rather than by whatever that collective's ranks then wait for.
  const std::string& stamp = ctx.stamp();
  std::vector<std::string> theirs(static_cast<std::size_t>(p), std::string(stamp.size(), '\0'));
  std::vector<RequestPtr> reqs;
  for (int k = 1; k < p; ++k) {
    const int from = direct_from(me, k, p);
    reqs.push_back(ctx.recv(g.rank(from), Channel::exchange_stamp, theirs[static_cast<std::size_t>(from)].data(), stamp.size()));
  }
  for (int k = 1; k < p; ++k) reqs.push_back(ctx.send(g.rank(direct_to(me, k, p)), Channel::exchange_stamp, stamp.data(), stamp.size()));
  co_await ctx.wait_all(reqs);
  for (int q = 0; q < p; ++q)
    if (q != me) ctx.check_stamp(g.rank(q), theirs[static_cast<std::size_t>(q)]);
}

}  // namespace strata::collectives
