// Collectives over a hierarchical plan (plan.hpp). Each plan runs allreduce,
// reduce_scatter, allgather and broadcast; the others stay flat (reduce and barrier gain
// nothing from levels). Arguments are the flat call's: counts per rank, root a world rank.
#pragma once

#include "collectives/dispatch.hpp"
#include "hierarchy/plan.hpp"
#include "quant/error_feedback.hpp"

namespace strata::hierarchy {

// Whether the plan runs this kind of collective; the others run flat.
bool plan_runs(const Plan& plan, CollectiveKind kind);

// Runs a collective the plan runs (plan_runs). A lossy a.compression (allreduce, f32)
// compresses the stage that crosses regions; `feedback` keeps the residuals of the
// shards this rank sends there.
collectives::Steps run_hierarchical(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                                    quant::ErrorFeedback* feedback);
// Whether the plan runs this call on device memory, with a device call's engines
// (run_on_device); the others are staged whole through host memory.
bool plan_runs_on_device(const Plan& plan, const collectives::CollArgs& a);
// `engines` must outlive the steps.
collectives::Steps run_on_device(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                                 const CallEngines& engines);

// Split rail (uniform layouts). Allreduce cuts the vector into STRATA_SEGMENT_BYTES
// segments and overlaps one segment's cross-region stage with the next one's
// reduce-scatter inside the region.
// `engines`: a device call's (kept alive by the caller until the steps end); null: the
// plan's own, on host memory.
collectives::Steps split_rail_allreduce(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                                        const CallEngines* engines = nullptr);
collectives::Steps split_rail_compressed_allreduce(collectives::Context& ctx, const Plan& plan,
                                     const collectives::CollArgs& a, quant::ErrorFeedback* feedback);
collectives::Steps split_rail_reduce_scatter(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                                             const CallEngines* engines = nullptr);
collectives::Steps split_rail_allgather(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                                        const CallEngines* engines = nullptr);
collectives::Steps split_rail_broadcast(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                                        const CallEngines* engines = nullptr);

// Leader plan (any layout).
collectives::Steps leader_allreduce(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a,
                      quant::ErrorFeedback* feedback = nullptr);
collectives::Steps leader_reduce_scatter(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a);
collectives::Steps leader_allgather(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a);
collectives::Steps leader_broadcast(collectives::Context& ctx, const Plan& plan, const collectives::CollArgs& a);

}  // namespace strata::hierarchy
