// Binomial trees: ceil(log2 p) rounds, each message the whole vector. The right choice
// when latency dominates; the ring wins once bytes do.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"

namespace strata::collectives {

Steps binomial_broadcast(Context& ctx, const Group& g, const void* send, void* recv,
                        std::size_t count, DataType dt, int root) {
  const std::size_t bytes = count * dtype_size(dt);
  const int p = g.size();
  const int vr = mod(g.me - root, p);
  auto real = [&](int v) { return g.rank(mod(v + root, p)); };
  if (vr == 0) {
    if (recv != send && bytes) std::memcpy(recv, send, bytes);
  } else {
    const auto r = ctx.recv(real(binomial_parent(vr)), Channel::data, recv, bytes);
    co_await ctx.wait(r);
    ctx.expect_bytes(r, bytes);
  }
  std::vector<RequestPtr> sends;
  for (int m = binomial_first_child_step(vr); vr + m < p; m <<= 1)
    sends.push_back(ctx.send(real(vr + m), Channel::data, recv, bytes));
  co_await ctx.wait_all(sends);
}

Steps binomial_reduce(Context& ctx, const Group& g, const void* send, void* recv,
                     std::size_t count, DataType dt, ReduceOp op, int root) {
  const std::size_t bytes = count * dtype_size(dt);
  const int p = g.size();
  const int vr = mod(g.me - root, p);
  auto real = [&](int v) { return g.rank(mod(v + root, p)); };
  char* acc = vr == 0 ? static_cast<char*>(recv) : static_cast<char*>(ctx.scratch(0, bytes));
  if (acc != send && bytes) std::memcpy(acc, send, bytes);

  // Post every child's receive at once into its own staging area, then fold in order.
  std::vector<int> children;
  for (int m = binomial_first_child_step(vr); vr + m < p; m <<= 1) children.push_back(vr + m);
  char* staging = static_cast<char*>(ctx.scratch(1, bytes * std::max<std::size_t>(1, children.size())));
  std::vector<RequestPtr> recvs;
  for (std::size_t i = 0; i < children.size(); ++i)
    recvs.push_back(ctx.recv(real(children[i]), Channel::data, staging + i * bytes, bytes));
  for (std::size_t i = 0; i < children.size(); ++i) {
    co_await ctx.wait(recvs[i]);
    ctx.expect_bytes(recvs[i], bytes);
    kernels::reduce(dt, op, acc, acc, staging + i * bytes, count);
  }
  if (vr != 0) {
    co_await ctx.wait(ctx.send(real(binomial_parent(vr)), Channel::data, acc, bytes));
  } else if (op == ReduceOp::avg) {
    kernels::finish_avg(dt, acc, count, p);
  }
}

}  // namespace strata::collectives
