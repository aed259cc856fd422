// Recursive doubling allreduce: log2 p exchanges of the whole vector. Non-powers of two
// fold the first 2*rem ranks in pairs first and hand the result back at the end. Both
// partners of an exchange compute a op b with the operands swapped; the kernels are
// commutative bit for bit, so every rank ends with identical bits.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"

namespace strata::collectives {

Steps recursive_doubling_allreduce(Context& ctx, const Group& g, const void* send, void* recv,
                                  std::size_t count, DataType dt, ReduceOp op) {
  const std::size_t bytes = count * dtype_size(dt);
  const int p = g.size(), me = g.me;
  if (recv != send && bytes) std::memcpy(recv, send, bytes);
  if (p == 1 || count == 0) co_return;
  char* acc = static_cast<char*>(recv);
  char* tmp = static_cast<char*>(ctx.scratch(0, bytes));
  const int p2 = pow2_floor(p), rem = p - p2;

  auto exchange = [&](int peer) -> Steps {
    const auto r = ctx.recv(g.rank(peer), Channel::data, tmp, bytes);
    const auto s = ctx.send(g.rank(peer), Channel::data, acc, bytes);
    co_await ctx.wait(r, s);
    ctx.expect_bytes(r, bytes);
    kernels::reduce(dt, op, acc, acc, tmp, count);
  };

  int vr;  // rank among the p2 that take part in the doubling
  if (me < 2 * rem) {
    if (me % 2 == 0) {
      co_await ctx.wait(ctx.send(g.rank(me + 1), Channel::data, acc, bytes));
      const auto r = ctx.recv(g.rank(me + 1), Channel::result, acc, bytes);
      co_await ctx.wait(r);
      ctx.expect_bytes(r, bytes);
      co_return;
    }
    const auto r = ctx.recv(g.rank(me - 1), Channel::data, tmp, bytes);
    co_await ctx.wait(r);
    ctx.expect_bytes(r, bytes);
    kernels::reduce(dt, op, acc, acc, tmp, count);
    vr = me / 2;
  } else {
    vr = me - rem;
  }
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int pv = vr ^ mask;
    co_await exchange(pv < rem ? 2 * pv + 1 : pv + rem);
  }
  if (op == ReduceOp::avg) kernels::finish_avg(dt, acc, count, p);
  if (me < 2 * rem) co_await ctx.wait(ctx.send(g.rank(me - 1), Channel::result, acc, bytes));
}

}  // namespace strata::collectives
