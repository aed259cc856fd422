// Picks the flat algorithm for one collective over one group and runs it: the one the
// call names, else the default. This is where the cost-model selector plugs in; today
// the default is a single size threshold.
#pragma once

#include <optional>

#include "collectives/context.hpp"
#include "strata/compression.hpp"
#include "strata/types.hpp"

namespace strata::collectives {

struct Algorithm;  // registry.hpp

struct CollArgs {
  CollectiveKind kind = CollectiveKind::barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;  // per-rank count, as in the public API
  DataType dtype = DataType::u8;
  ReduceOp op = ReduceOp::sum;
  int root = 0;           // group index
  std::optional<Compression> compression;  // allreduce only; unset or none: exact
  // A registered algorithm the caller asked for (CallOptions::algorithm, checked against
  // the registry before the call was queued); nullptr: the default choice.
  const Algorithm* algorithm = nullptr;
};

void run_collective(Context& ctx, const Group& g, const CollArgs& a);

}  // namespace strata::collectives
