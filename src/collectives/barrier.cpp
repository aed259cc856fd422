#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"

namespace strata::collectives {

Steps dissemination_barrier(Context& ctx, const Group& g, Channel ch) {
  const int p = g.size();
  for (int d = 1; d < p; d <<= 1) {
    const auto r = ctx.recv(g.rank(mod(g.me - d, p)), ch, nullptr, 0);
    const auto s = ctx.send(g.rank(mod(g.me + d, p)), ch, nullptr, 0);
    co_await ctx.wait(r, s);
  }
}

}  // namespace strata::collectives
