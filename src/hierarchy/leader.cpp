// Leader plans, for layouts where levels do not nest evenly. At each level the group's
// member 0 (its lowest rank) is the leader of the enclosing unit, so data climbs by
// reducing or gathering to member 0, crosses regions among the cluster leaders, and comes
// back down by broadcast. Results are bitwise identical everywhere because only the top
// group computes and everyone else receives copies.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "kernels/reduce.hpp"
#include "hierarchy/hierarchical.hpp"
#include "quant/compressed_allreduce.hpp"

namespace strata::hierarchy {

using collectives::CollArgs;
using collectives::Context;
using collectives::Group;
using collectives::Steps;

namespace {

// A whole collective at one level, by the level's engine.
Steps run(Context& ctx, const Plan& p, int level, CollectiveKind kind, const void* send, void* recv,
          std::size_t count, DataType dt, ReduceOp op = ReduceOp::sum, int root = 0) {
  const CollArgs a{kind, send, recv, count, dt, op, root, {}};
  co_await p.engine(level).collective(ctx, p.mine[static_cast<std::size_t>(level)], a);
}

// The levels below the top where this rank takes part, innermost first: it leads its
// group at all of them but possibly the last, where it hands its data to the leader.
std::vector<int> climb(const Plan& p) {
  std::vector<int> levels;
  for (int i = 0; i + 1 < p.depth(); ++i) {
    const Group& g = p.mine[static_cast<std::size_t>(i)];
    if (g.ranks.empty()) continue;  // a level with no group of ours (we lead a single unit)
    levels.push_back(i);
    if (g.me != 0) break;
  }
  return levels;
}

bool at_top(const Plan& p) { return !p.mine.back().ranks.empty(); }

// rep[q]: the rank holding q's data after the levels up to and including `level` climbed.
std::vector<int> representatives(const Plan& p, int level) {
  std::vector<int> rep(static_cast<std::size_t>(p.world_size));
  for (int q = 0; q < p.world_size; ++q) {
    int r = q;
    for (int i = 0; i <= level; ++i) {
      const auto& lg = p.levels[static_cast<std::size_t>(i)];
      const int g = lg.group_of[static_cast<std::size_t>(r)];
      if (g >= 0) r = lg.groups[static_cast<std::size_t>(g)].front();
    }
    rep[static_cast<std::size_t>(q)] = r;
  }
  return rep;
}

// The world ranks whose blocks `holder` carries after `level` (level -1: just itself).
std::vector<int> carried_by(const Plan& p, int level, int holder) {
  const auto rep = representatives(p, level);
  std::vector<int> out;
  for (int q = 0; q < p.world_size; ++q)
    if (rep[static_cast<std::size_t>(q)] == holder) out.push_back(q);
  return out;
}

Steps broadcast_down(Context& ctx, const Plan& p, const std::vector<int>& levels, void* buf,
                    std::size_t count, DataType dt) {
  for (auto it = levels.rbegin(); it != levels.rend(); ++it)
    co_await run(ctx, p, *it, CollectiveKind::broadcast, buf, buf, count, dt);
}

}  // namespace

Steps leader_allreduce(Context& ctx, const Plan& plan, const CollArgs& a, quant::ErrorFeedback* feedback) {
  const ReduceOp partial = a.op == ReduceOp::avg ? ReduceOp::sum : a.op;
  const void* src = a.send;
  const auto levels = climb(plan);
  for (int i : levels) {
    co_await run(ctx, plan, i, CollectiveKind::reduce, src, a.recv, a.count, a.dtype, partial);
    src = a.recv;
  }
  if (at_top(plan) && a.compression && a.compression->lossy()) {
    if (src != a.recv) std::memcpy(a.recv, src, a.count * sizeof(float));
    co_await quant::compressed_allreduce(ctx, plan.mine.back(), static_cast<float*>(a.recv), a.count, *a.compression,
                                feedback, quant::Shard{0, a.count}, a.op, plan.world_size);
  } else if (at_top(plan)) {
    co_await run(ctx, plan, plan.depth() - 1, CollectiveKind::allreduce, src, a.recv, a.count, a.dtype, partial);
    if (a.op == ReduceOp::avg) kernels::finish_avg(a.dtype, a.recv, a.count, plan.world_size);
  }
  co_await broadcast_down(ctx, plan, levels, a.recv, a.count, a.dtype);
}

Steps leader_reduce_scatter(Context& ctx, const Plan& plan, const CollArgs& a) {
  // The leaders' links carry the whole vector either way; reducing all of it and keeping
  // one block keeps this plan as simple as its allreduce.
  const std::size_t block = a.count * dtype_size(a.dtype);
  const std::size_t total = a.count * static_cast<std::size_t>(plan.world_size);
  char* full = static_cast<char*>(ctx.scratch(3, total * dtype_size(a.dtype)));
  CollArgs whole = a;
  whole.recv = full;
  whole.count = total;
  co_await leader_allreduce(ctx, plan, whole);
  std::memcpy(a.recv, full + static_cast<std::size_t>(plan.rank) * block, block);
}

Steps leader_allgather(Context& ctx, const Plan& plan, const CollArgs& a) {
  const std::size_t block = a.count * dtype_size(a.dtype);
  char* out = static_cast<char*>(a.recv);
  if (a.send != out + static_cast<std::size_t>(plan.rank) * block && block)
    std::memcpy(out + static_cast<std::size_t>(plan.rank) * block, a.send, block);

  // Blocks travel packed in rank order; both ends know which ranks a holder carries.
  auto pack = [&](const std::vector<int>& ranks, char* dst) {
    for (std::size_t k = 0; k < ranks.size() && block; ++k)
      std::memcpy(dst + k * block, out + static_cast<std::size_t>(ranks[k]) * block, block);
  };
  auto unpack = [&](const std::vector<int>& ranks, const char* src) {
    for (std::size_t k = 0; k < ranks.size() && block; ++k)
      std::memcpy(out + static_cast<std::size_t>(ranks[k]) * block, src + k * block, block);
  };
  char* staging = static_cast<char*>(ctx.scratch(3, static_cast<std::size_t>(plan.world_size) * block));
  const auto levels = climb(plan);
  for (int i : levels) {
    const Group& g = plan.mine[static_cast<std::size_t>(i)];
    if (g.me != 0) {
      const auto mine = carried_by(plan, i - 1, plan.rank);
      pack(mine, staging);
      co_await ctx.wait(ctx.send(g.rank(0), collectives::Channel::data2, staging, mine.size() * block));
      continue;
    }
    for (int m = 1; m < g.size(); ++m) {
      const auto theirs = carried_by(plan, i - 1, g.rank(m));
      auto req = ctx.recv(g.rank(m), collectives::Channel::data2, staging, theirs.size() * block);
      co_await ctx.wait(req);
      ctx.expect_bytes(req, theirs.size() * block);
      unpack(theirs, staging);
    }
  }
  if (at_top(plan)) {
    // Few cluster leaders: each sends its packed blocks straight to every other one.
    const Group& top = plan.mine.back();
    const int below = plan.depth() - 2;
    const auto mine = carried_by(plan, below, plan.rank);
    std::vector<char> packed(mine.size() * block);
    pack(mine, packed.data());
    std::vector<collectives::RequestPtr> sends;
    for (int m = 0; m < top.size(); ++m)
      if (m != top.me) sends.push_back(ctx.send(top.rank(m), collectives::Channel::data2, packed.data(), packed.size()));
    for (int m = 0; m < top.size(); ++m) {
      if (m == top.me) continue;
      const auto theirs = carried_by(plan, below, top.rank(m));
      auto req = ctx.recv(top.rank(m), collectives::Channel::data2, staging, theirs.size() * block);
      co_await ctx.wait(req);
      ctx.expect_bytes(req, theirs.size() * block);
      unpack(theirs, staging);
    }
    co_await ctx.wait_all(sends);
  }
  co_await broadcast_down(ctx, plan, levels, out, a.count * static_cast<std::size_t>(plan.world_size), a.dtype);
}

Steps leader_broadcast(Context& ctx, const Plan& plan, const CollArgs& a) {
  // The root hands its data to the leader that represents it at the top.
  const int top_leader = representatives(plan, plan.depth() - 2)[static_cast<std::size_t>(a.root)];
  const std::size_t bytes = a.count * dtype_size(a.dtype);
  if (plan.rank == a.root && a.send != a.recv && bytes) std::memcpy(a.recv, a.send, bytes);
  if (a.root != top_leader) {
    if (plan.rank == a.root)
      co_await ctx.wait(ctx.send(top_leader, collectives::Channel::data2, a.send, bytes));
    if (plan.rank == top_leader) {
      auto req = ctx.recv(a.root, collectives::Channel::data2, a.recv, bytes);
      co_await ctx.wait(req);
      ctx.expect_bytes(req, bytes);
    }
  }
  if (at_top(plan))
    co_await run(ctx, plan, plan.depth() - 1, CollectiveKind::broadcast, a.recv, a.recv, a.count, a.dtype, ReduceOp::sum,
        plan.position(plan.depth() - 1, top_leader));
  const auto levels = climb(plan);
  co_await broadcast_down(ctx, plan, levels, a.recv, a.count, a.dtype);
}

}  // namespace strata::hierarchy
