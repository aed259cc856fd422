// The host engine: a level's steps as the flat algorithms run them over the transport.
#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "hierarchy/level_engine.hpp"

namespace strata::hierarchy {

using collectives::Channel;
using collectives::CollArgs;
using collectives::Context;
using collectives::Group;
using collectives::Steps;

namespace {

class HostEngine final : public LevelEngine {
 public:
  const char* name() const override { return "host"; }

  Steps collective(Context& ctx, const Group& g, const CollArgs& a) const override {
    return collectives::run_collective(ctx, g, a);
  }
  Steps reduce_scatter_pieces(Context& ctx, const Group& g, const void* send, void* recv, std::size_t n,
                              DataType dt, ReduceOp op) const override {
    return collectives::ring_reduce_scatter_pieces(ctx, g, send, recv, n, dt, op);
  }
  Steps allgather_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt) const override {
    return collectives::ring_allgather_pieces(ctx, g, buf, n, dt);
  }
  Steps allreduce_pieces(Context& ctx, const Group& g, void* buf, std::size_t n, DataType dt, ReduceOp op,
                         Channel ch, int avg_divisor) const override {
    return collectives::ring_allreduce_pieces(ctx, g, buf, n, dt, op, ch, avg_divisor);
  }
  Steps scatter_pieces(Context& ctx, const Group& g, const char* src, char* out, std::size_t n, DataType dt,
                       int from) const override {
    return scatter(ctx, g, src, out, n, dtype_size(dt), from);
  }

 private:
  static Steps scatter(Context& ctx, const Group& g, const char* src, char* out, std::size_t n, std::size_t esz,
                       int from) {
    const auto parts = static_cast<std::size_t>(g.size());
    auto begin = [&](int m) { return collectives::piece_begin(n, parts, static_cast<std::size_t>(m)) * esz; };
    auto bytes = [&](int m) { return collectives::piece_size(n, parts, static_cast<std::size_t>(m)) * esz; };
    if (g.me != from) {
      auto req = ctx.recv(g.rank(from), Channel::data2, out + begin(g.me), bytes(g.me));
      co_await ctx.wait(req);
      ctx.expect_bytes(req, bytes(g.me));
      co_return;
    }
    std::vector<collectives::RequestPtr> sends;
    for (int m = 0; m < g.size(); ++m) {
      if (m == g.me)
        collectives::copy_if_distinct(out + begin(m), src + begin(m), bytes(m));
      else
        sends.push_back(ctx.send(g.rank(m), Channel::data2, src + begin(m), bytes(m)));
    }
    co_await ctx.wait_all(std::move(sends));
  }
};

}  // namespace

const LevelEngine& host_engine() {
  static const HostEngine engine;
  return engine;
}

}  // namespace strata::hierarchy
