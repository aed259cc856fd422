#include "hierarchy/hierarchical.hpp"

namespace strata::hierarchy {

bool run_hierarchical(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                      quant::ErrorFeedback* feedback) {
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
    default:
      return false;
  }
}

}  // namespace strata::hierarchy
