#include "hierarchy/hierarchical.hpp"

namespace strata::hierarchy {

bool plan_runs(const Plan& plan, CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::allreduce:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::allgather:
    case CollectiveKind::broadcast:
      return true;
    case CollectiveKind::barrier:
      // Split rail: every rank is at every level, and the levels' groups cut the world
      // like the digits of a number, so a barrier per level, innermost first, waits for
      // all: the region level's crosses the WAN once. The leader plan's non-leaders
      // would need a second pass down; it runs flat.
      return plan.kind == Plan::Kind::split_rail;
    default:
      return false;
  }
}

bool run_hierarchical(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                      quant::ErrorFeedback* feedback) {
  if (!plan_runs(plan, a.kind)) return false;
  const bool split = plan.kind == Plan::Kind::split_rail;
  const bool compressed = a.compression && a.compression->lossy();
  switch (a.kind) {
    case CollectiveKind::allreduce:
      if (!split)
        leader_allreduce(ctx, plan, a, compressed ? feedback : nullptr);
      else if (compressed)
        split_rail_compressed_allreduce(ctx, plan, a, feedback);
      else
        split_rail_allreduce(ctx, plan, a);
      return true;
    case CollectiveKind::reduce_scatter:
      split ? split_rail_reduce_scatter(ctx, plan, a) : leader_reduce_scatter(ctx, plan, a);
      return true;
    case CollectiveKind::allgather:
      split ? split_rail_allgather(ctx, plan, a) : leader_allgather(ctx, plan, a);
      return true;
    case CollectiveKind::broadcast:
      split ? split_rail_broadcast(ctx, plan, a) : leader_broadcast(ctx, plan, a);
      return true;
    case CollectiveKind::barrier:
      for (const auto& g : plan.mine) collectives::run_collective(ctx, g, a);
      return true;
    default:
      return false;
  }
}

}  // namespace strata::hierarchy
