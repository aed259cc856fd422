// Pipelined chain broadcast: root -> next -> ... in group order from the root. Each
// chunk is forwarded the moment it lands, so the time is about N/B plus (p-2) chunks.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"

namespace strata::collectives {

Steps chain_broadcast(Context& ctx, const Group& g, const void* send, void* recv,
                     std::size_t count, DataType dt, int root) {
  const std::size_t esz = dtype_size(dt);
  const int p = g.size();
  const int vr = mod(g.me - root, p);
  const std::size_t C = chunk_count(count, esz, ctx.chunk_bytes());
  const bool has_next = vr + 1 < p;
  const int next = g.rank(mod(g.me + 1, p));
  auto off = [&](std::size_t c) { return piece_begin(count, C, c) * esz; };
  auto len = [&](std::size_t c) { return piece_size(count, C, c) * esz; };
  std::vector<RequestPtr> sends;

  if (vr == 0) {
    const char* src = static_cast<const char*>(send);
    if (has_next)
      for (std::size_t c = 0; c < C; ++c)
        sends.push_back(ctx.send(next, Channel::data, src + off(c), len(c)));
    // The root's own copy overlaps with the sends already on their way.
    if (recv != send && count) std::memcpy(recv, send, count * esz);
    co_await ctx.wait_all(sends);
    co_return;
  }
  char* dst = static_cast<char*>(recv);
  const int prev = g.rank(mod(g.me - 1, p));
  std::vector<RequestPtr> recvs;
  for (std::size_t c = 0; c < C; ++c) recvs.push_back(ctx.recv(prev, Channel::data, dst + off(c), len(c)));
  for (std::size_t c = 0; c < C; ++c) {
    co_await ctx.wait(recvs[c]);
    ctx.expect_bytes(recvs[c], len(c));
    if (has_next) sends.push_back(ctx.send(next, Channel::data, dst + off(c), len(c)));
  }
  co_await ctx.wait_all(sends);
}

}  // namespace strata::collectives
