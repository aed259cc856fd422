// What the cost model charges a hierarchical plan, for the selector's per-call choices
// inside the plan (split rail's latency path) and for strata-plan's tables.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "hierarchy/plan.hpp"
#include "quant/codec.hpp"
#include "topology/cost_model.hpp"
#include "topology/selector.hpp"
#include "transport/link_report.hpp"

namespace strata::hierarchy {

// Each level at its largest group's links, innermost first, with the figures' threshold.
Plan::Pricing price_levels(const topology::Selector& sel, const Plan& plan);

// Whether a split-rail allreduce or broadcast of `bytes` takes the latency path (the
// whole collective once per level) rather than the pipeline (reduce-scatter or scatter
// down, the top level on a shard, allgather up): only up to STRATA_SMALL_BYTES, only
// while the path is latency-bound, and then only where the model prices it no dearer.
// Across a slow WAN the pipeline's smaller top-level message wins from a few KiB on; on
// fast links the fewer steps win.
bool prefers_latency_path(const Plan::Pricing& pricing, CollectiveKind kind, std::size_t bytes);

// How many segments' cross-region stages a split-rail allreduce keeps in flight, each
// sending `step_bytes` per ring step: a stage waits a one-way trip between its steps
// behind the younger stages' bytes queued on the same streams, so the stages together
// must hold four round trips of what the path carries, six where it loses packets (a
// stream refilling a loss holds its stage back). The round trip and rate are what the
// link measured (`path`), else the plan's figures; from 2 to 32.
std::size_t stages_in_flight(const Plan& plan, const transport::PathFigures& path, std::size_t step_bytes);

// The plan's predicted time, taking the path the plan will take.
topology::Cost predict_plan(const topology::Selector& sel, const Plan& plan, CollectiveKind kind, double bytes);

// A compressed allreduce (allreduce with a lossy codec) of `bytes` on the plan: exact
// below the top level, the codec's exchange across regions, `how` or else the one the
// selector picks for rank 0's top group (so what the communicator will run).
struct CompressedPrediction {
  topology::Cost cost;
  collectives::EncodedExchange exchange = collectives::EncodedExchange::gather;
  double top_bytes = 0;       // dense bytes each top-level member reduces
  double wan_bytes = 0;       // what a top-level member sends across regions
  double exact_wan_bytes = 0; // the same for the exact plan (a ring on the top level)
};
CompressedPrediction predict_compressed_plan(const topology::Selector& sel, const Plan& plan, const quant::Codec& codec,
                                             double bytes,
                                             std::optional<collectives::EncodedExchange> how = std::nullopt);

}  // namespace strata::hierarchy
