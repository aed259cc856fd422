// Split-rail plans: at every level a rank works with the ranks that hold the same
// position at every other level, so the levels nest like digits of a mixed-radix number
// (level 0 most significant). Reduce-scatter down the levels leaves each rank a 1/P
// shard; the region level moves only that shard, over every rank's own WAN path.
#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"
#include "hierarchy/hierarchical.hpp"
#include "hierarchy/plan_cost.hpp"
#include "quant/compressed_allreduce.hpp"
#include "strata/errors.hpp"

namespace strata::hierarchy {

using collectives::CollArgs;
using collectives::Context;
using collectives::Group;
using collectives::Steps;
using collectives::copy_if_distinct;

namespace {

struct Range {
  std::size_t off = 0, n = 0;
};

// The range this rank works on at each level, outermost last: level i splits ranges[i]
// among its group and this rank keeps piece g.me, which is ranges[i + 1].
std::vector<Range> descend(const Plan& p, Range whole) {
  std::vector<Range> out{whole};
  for (const Group& g : p.mine) {
    const Range& cur = out.back();
    const auto parts = static_cast<std::size_t>(g.size()), me = static_cast<std::size_t>(g.me);
    out.push_back(Range{cur.off + collectives::piece_begin(cur.n, parts, me),
                        collectives::piece_size(cur.n, parts, me)});
  }
  return out;
}

// Where world rank q's block sits when blocks are ordered like the levels' pieces.
std::size_t block_index(const Plan& p, int q) {
  std::size_t idx = 0;
  for (int i = 0; i < p.depth(); ++i)
    idx = idx * static_cast<std::size_t>(p.mine[static_cast<std::size_t>(i)].size()) +
          static_cast<std::size_t>(p.position(i, q));
  return idx;
}

// The latency path (a whole collective per level) or the pipeline: by the communicator's
// cost model when it runs one (plan_cost.hpp), else by the small size alone.
bool latency_path(const Plan& plan, CollectiveKind kind, std::size_t bytes) {
  if (plan.pricing) return prefers_latency_path(*plan.pricing, kind, bytes);
  return bytes <= plan.small_bytes;
}

// One segment's cross-region stage, in flight beside the next segments' work on scratch
// memory of its own.
struct Stage {
  Context ctx;
  collectives::Steps steps;
};

}  // namespace

Steps split_rail_allreduce(Context& ctx, const Plan& plan, const CollArgs& a, const CallEngines* call_engines) {
  // In the coroutine's frame: a reference parameter to a temporary would outlive it.
  const PlanEngines own(plan);
  const CallEngines& engines = call_engines ? *call_engines : own;
  const std::size_t esz = dtype_size(a.dtype);
  const ReduceOp partial = a.op == ReduceOp::avg ? ReduceOp::sum : a.op;
  const int avg_div = a.op == ReduceOp::avg ? plan.world_size : 0;
  char* out = static_cast<char*>(a.recv);
  const int depth = plan.depth();

  if (!engines.on_device() && latency_path(plan, CollectiveKind::allreduce, a.count * esz)) {
    // Latency first: a log(p)-step allreduce per level, every rank ending with the same bits.
    const void* src = a.send;
    for (int i = 0; i < depth; ++i) {
      const CollArgs level{CollectiveKind::allreduce, src, out, a.count, a.dtype, partial, 0, {}};
      co_await engines.level(i).collective(ctx, plan.mine[static_cast<std::size_t>(i)], level);
      src = out;
    }
    if (avg_div) kernels::finish_avg(a.dtype, out, a.count, avg_div);
    co_return;
  }

  // Segments small enough that the WAN starts early, few enough to keep stage channels
  // distinct among the segments in flight. With no level below the region, segments
  // still pay: several stages in flight keep every ring step's link busy.
  const std::size_t seg_elems = std::max<std::size_t>(
      {std::size_t{1}, plan.segment_bytes / esz,
       (a.count + transport::kStageChannels - 1) / transport::kStageChannels});
  const std::size_t segments = (a.count + seg_elems - 1) / seg_elems;
  const Group& top = plan.mine.back();
  // Enough stages stay in flight while the next segment is reduced that the WAN link
  // always has queued work across its round trip; segments still finish in order. How
  // many is the same on every rank of a region, or two that disagree would each wait in a
  // different level step for the other: on the host's transports it is the most any rank
  // of the region asks for from what its own link measured (a maximum over the levels
  // below the top, 8 bytes each, first in the call on every rank); on a device, where the
  // levels' calls are NCCL's, what the figures every rank shares say.
  const auto regions = static_cast<std::size_t>(std::max(1, top.size()));
  const std::size_t shard_bytes = seg_elems * esz / std::max<std::size_t>(1, plan.world_size / regions);
  const bool measured = !engines.on_device();
  std::int64_t in_flight_most = static_cast<std::int64_t>(
      stages_in_flight(plan, measured ? ctx.path() : transport::PathFigures{}, shard_bytes / regions));
  // Each stage in flight, and the one being started, may need an engine's slot.
  in_flight_most = std::min<std::int64_t>(
      in_flight_most, static_cast<std::int64_t>(std::min<std::size_t>(engines.level(depth - 1).stages_at_once(), 33) - 1));
  for (int i = 0; measured && i + 1 < depth; ++i) {
    const CollArgs most{CollectiveKind::allreduce, &in_flight_most, &in_flight_most, 1, DataType::i64, ReduceOp::max, 0, {}};
    co_await engines.level(i).collective(ctx, plan.mine[static_cast<std::size_t>(i)], most);
  }

  std::deque<std::unique_ptr<Stage>> in_flight;  // oldest first
  std::vector<std::vector<Range>> ranges(segments);
  // The intra-region allgather of a segment runs once its cross-region stage is done.
  std::size_t next_to_gather = 0;
  auto gather_oldest = [&]() -> Steps {
    const std::size_t s = next_to_gather++;
    co_await in_flight.front()->steps;
    in_flight.pop_front();
    for (int i = depth - 2; i >= 0; --i) {
      const Range& r = ranges[s][static_cast<std::size_t>(i)];
      co_await engines.level(i).allgather_pieces(ctx, plan.mine[static_cast<std::size_t>(i)], out + r.off * esz, r.n,
                                                  a.dtype);
    }
  };
  for (std::size_t s = 0; s < segments; ++s) {
    const std::size_t b = collectives::piece_begin(a.count, segments, s);
    ranges[s] = descend(plan, Range{b, collectives::piece_size(a.count, segments, s)});
    const char* src = static_cast<const char*>(a.send);
    for (int i = 0; i + 1 < depth; ++i) {
      const Range& r = ranges[s][static_cast<std::size_t>(i)];
      co_await engines.level(i).reduce_scatter_pieces(ctx, plan.mine[static_cast<std::size_t>(i)], src + r.off * esz,
                                                       out + r.off * esz, r.n, a.dtype, partial);
      src = out;
    }
    const Range& shard = ranges[s][static_cast<std::size_t>(depth - 1)];
    if (depth == 1) engines.copy(out + shard.off * esz, src + shard.off * esz, shard.n * esz);
    // At most in_flight_most + 1 stages are in flight at once: as many lanes of scratch.
    auto stage = std::make_unique<Stage>(Stage{ctx.lane(s % static_cast<std::size_t>(in_flight_most + 1)), {}});
    stage->steps = engines.level(depth - 1).allreduce_pieces(stage->ctx, top, out + shard.off * esz, shard.n, a.dtype,
                                                           partial, transport::stage_channel(s), avg_div);
    ctx.start(stage->steps);
    in_flight.push_back(std::move(stage));
    if (in_flight.size() > static_cast<std::size_t>(in_flight_most)) co_await gather_oldest();
  }
  while (!in_flight.empty()) co_await gather_oldest();
}

Steps split_rail_compressed_allreduce(Context& ctx, const Plan& plan, const CollArgs& a,
                                     quant::ErrorFeedback* feedback) {
  // Not segmented: the compressed WAN stage is small, and one shard per rank keeps one
  // residual per rank and tensor.
  char* out = static_cast<char*>(a.recv);
  const ReduceOp partial = a.op == ReduceOp::avg ? ReduceOp::sum : a.op;
  const auto ranges = descend(plan, Range{0, a.count});
  const char* src = static_cast<const char*>(a.send);
  const int depth = plan.depth();
  for (int i = 0; i + 1 < depth; ++i) {
    const Range& r = ranges[static_cast<std::size_t>(i)];
    co_await plan.engine(i).reduce_scatter_pieces(ctx, plan.mine[static_cast<std::size_t>(i)], src + r.off * sizeof(float),
                                            out + r.off * sizeof(float), r.n, a.dtype, partial);
    src = out;
  }
  const Range& shard = ranges[static_cast<std::size_t>(depth - 1)];
  copy_if_distinct(out + shard.off * sizeof(float), src + shard.off * sizeof(float), shard.n * sizeof(float));
  co_await quant::compressed_allreduce(ctx, plan.mine.back(), reinterpret_cast<float*>(out) + shard.off, shard.n,
                              *a.compression, feedback, quant::Shard{shard.off, shard.n}, a.op, plan.world_size,
                              // every rail crosses at once
                              static_cast<double>(plan.world_size) / std::max(1, plan.mine.back().size()));
  for (int i = depth - 2; i >= 0; --i) {
    const Range& r = ranges[static_cast<std::size_t>(i)];
    co_await plan.engine(i).allgather_pieces(ctx, plan.mine[static_cast<std::size_t>(i)], out + r.off * sizeof(float), r.n,
                                       a.dtype);
  }
}

Steps split_rail_reduce_scatter(Context& ctx, const Plan& plan, const CollArgs& a, const CallEngines* call_engines) {
  const PlanEngines own(plan);
  const CallEngines& engines = call_engines ? *call_engines : own;
  const std::size_t esz = dtype_size(a.dtype), block = a.count * esz;
  const auto world = static_cast<std::size_t>(plan.world_size);
  // Reorder the blocks so that every level's pieces are whole blocks, ending with our own.
  char* tmp = static_cast<char*>(engines.scratch(ctx, world * block));
  const char* send = static_cast<const char*>(a.send);
  for (int q = 0; q < plan.world_size; ++q)
    engines.copy(tmp + block_index(plan, q) * block, send + static_cast<std::size_t>(q) * block, block);
  const ReduceOp partial = a.op == ReduceOp::avg ? ReduceOp::sum : a.op;
  const auto ranges = descend(plan, Range{0, world * a.count});
  for (int i = 0; i < plan.depth(); ++i) {
    const Range& r = ranges[static_cast<std::size_t>(i)];
    co_await engines.level(i).reduce_scatter_pieces(ctx, plan.mine[static_cast<std::size_t>(i)], tmp + r.off * esz,
                                                    tmp + r.off * esz, r.n, a.dtype, partial);
  }
  engines.copy(a.recv, tmp + ranges.back().off * esz, block);
  // Not on the device (plan_runs_on_device): the host divides.
  if (a.op == ReduceOp::avg) kernels::finish_avg(a.dtype, a.recv, a.count, plan.world_size);
}

Steps split_rail_allgather(Context& ctx, const Plan& plan, const CollArgs& a, const CallEngines* call_engines) {
  const PlanEngines own(plan);
  const CallEngines& engines = call_engines ? *call_engines : own;
  const std::size_t esz = dtype_size(a.dtype), block = a.count * esz;
  const auto world = static_cast<std::size_t>(plan.world_size);
  char* tmp = static_cast<char*>(engines.scratch(ctx, world * block));
  engines.copy(tmp + block_index(plan, plan.rank) * block, a.send, block);
  const auto ranges = descend(plan, Range{0, world * a.count});
  // Outermost first: the WAN carries only the blocks of this rank's rail.
  for (int i = plan.depth() - 1; i >= 0; --i) {
    const Range& r = ranges[static_cast<std::size_t>(i)];
    co_await engines.level(i).allgather_pieces(ctx, plan.mine[static_cast<std::size_t>(i)], tmp + r.off * esz, r.n,
                                               a.dtype);
  }
  char* recv = static_cast<char*>(a.recv);
  for (int q = 0; q < plan.world_size; ++q)
    engines.copy(recv + static_cast<std::size_t>(q) * block, tmp + block_index(plan, q) * block, block);
}

namespace {

// True when this rank agrees with `root` at every level in [from, to).
bool same_positions(const Plan& p, int root, int from, int to) {
  for (int j = from; j < to; ++j)
    if (p.position(j, p.rank) != p.position(j, root)) return false;
  return true;
}

}  // namespace

Steps split_rail_broadcast(Context& ctx, const Plan& plan, const CollArgs& a, const CallEngines* call_engines) {
  const PlanEngines own(plan);
  const CallEngines& engines = call_engines ? *call_engines : own;
  const std::size_t esz = dtype_size(a.dtype);
  const int depth = plan.depth(), root = a.root;
  char* out = static_cast<char*>(a.recv);
  const char* send = static_cast<const char*>(a.send);
  if (plan.rank == root) engines.copy(out, send, a.count * esz);
  auto bcast = [&](int level, char* buf, std::size_t n) -> Steps {
    const Group& g = plan.mine[static_cast<std::size_t>(level)];
    const CollArgs b{CollectiveKind::broadcast, buf, buf, n, a.dtype, ReduceOp::sum, plan.position(level, root), {}};
    co_await engines.level(level).collective(ctx, g, b);
  };

  if (latency_path(plan, CollectiveKind::broadcast, a.count * esz)) {
    // Across regions first along the root's rail, then down each level: one WAN crossing.
    for (int i = depth - 1; i >= 0; --i)
      if (same_positions(plan, root, 0, i)) co_await bcast(i, out, a.count);
    co_return;
  }
  // Scatter inside the root's region, move each piece along its own rail, allgather
  // inside every region: each rank's WAN path carries 1/P of the message.
  const auto ranges = descend(plan, Range{0, a.count});
  for (int i = 0; i + 1 < depth; ++i)
    if (same_positions(plan, root, i + 1, depth))
      co_await engines.level(i).scatter_pieces(ctx, plan.mine[static_cast<std::size_t>(i)],
                                             out + ranges[static_cast<std::size_t>(i)].off * esz,
                                             out + ranges[static_cast<std::size_t>(i)].off * esz,
                                             ranges[static_cast<std::size_t>(i)].n, a.dtype, plan.position(i, root));
  const Range& shard = ranges[static_cast<std::size_t>(depth - 1)];
  co_await bcast(depth - 1, out + shard.off * esz, shard.n);
  for (int i = depth - 2; i >= 0; --i) {
    const Range& r = ranges[static_cast<std::size_t>(i)];
    co_await engines.level(i).allgather_pieces(ctx, plan.mine[static_cast<std::size_t>(i)], out + r.off * esz, r.n,
                                               a.dtype);
  }
}

}  // namespace strata::hierarchy
