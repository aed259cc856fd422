// Hierarchical allreduce (DESIGN §4): reduce-scatter down the levels inside a region,
// allreduce of the resulting 1/P shard across regions, allgather back up. Every rank's
// WAN path carries 2(R-1)/R of its shard, so the region sends the minimum over all NICs.
#pragma once

#include <vector>

#include "collectives/context.hpp"
#include "strata/types.hpp"

namespace strata::hierarchy {

// levels: this rank's groups, innermost first; the last one is the region level.
// world_size divides the result for ReduceOp::avg.
void hierarchical_allreduce(collectives::Context& ctx,
                            const std::vector<collectives::Group>& levels, const void* send,
                            void* recv, std::size_t count, DataType dt, ReduceOp op,
                            int world_size);

}  // namespace strata::hierarchy
