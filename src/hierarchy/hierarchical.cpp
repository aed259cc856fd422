#include "hierarchy/hierarchical.hpp"

#include <stdexcept>
#include <string>

namespace strata::hierarchy {

namespace {

// Innermost level first; see plan_runs.
collectives::Steps barrier_per_level(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a) {
  for (int i = 0; i < plan.depth(); ++i) co_await plan.engine(i).collective(ctx, plan.mine[static_cast<std::size_t>(i)], a);
}

}  // namespace

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

collectives::Steps run_hierarchical(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                                    quant::ErrorFeedback* feedback) {
  if (!plan_runs(plan, a.kind))
    throw std::logic_error(std::string("a hierarchical plan does not run ") + to_string(a.kind));
  const bool split = plan.kind == Plan::Kind::split_rail;
  const bool compressed = a.compression && a.compression->lossy();
  switch (a.kind) {
    case CollectiveKind::allreduce:
      if (!split) return leader_allreduce(ctx, plan, a, compressed ? feedback : nullptr);
      if (compressed) return split_rail_compressed_allreduce(ctx, plan, a, feedback);
      return split_rail_allreduce(ctx, plan, a);
    case CollectiveKind::reduce_scatter:
      return split ? split_rail_reduce_scatter(ctx, plan, a) : leader_reduce_scatter(ctx, plan, a);
    case CollectiveKind::allgather:
      return split ? split_rail_allgather(ctx, plan, a) : leader_allgather(ctx, plan, a);
    case CollectiveKind::broadcast:
      return split ? split_rail_broadcast(ctx, plan, a) : leader_broadcast(ctx, plan, a);
    default:  // barrier, split rail
      return barrier_per_level(ctx, plan, a);
  }
}

bool plan_runs_on_device(const Plan& plan, const collectives::CollArgs& a) {
  if (plan.kind != Plan::Kind::split_rail) return false;
  switch (a.kind) {
    case CollectiveKind::allreduce:
      return !(a.compression && a.compression->lossy());
    case CollectiveKind::reduce_scatter:
      return a.op != ReduceOp::avg;  // its division runs on the host
    case CollectiveKind::allgather:
    case CollectiveKind::broadcast:
      return true;
    default:
      return false;
  }
}

collectives::Steps run_on_device(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                                 const CallEngines& engines) {
  if (!plan_runs_on_device(plan, a))
    throw std::logic_error(std::string("the device plan does not run ") + to_string(a.kind));
  switch (a.kind) {
    case CollectiveKind::reduce_scatter: return split_rail_reduce_scatter(ctx, plan, a, &engines);
    case CollectiveKind::allgather: return split_rail_allgather(ctx, plan, a, &engines);
    case CollectiveKind::broadcast: return split_rail_broadcast(ctx, plan, a, &engines);
    default: return split_rail_allreduce(ctx, plan, a, &engines);
  }
}

}  // namespace strata::hierarchy
