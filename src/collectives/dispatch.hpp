// Picks the flat algorithm for one collective over one group and runs it: the one the
// call names, else the context's chooser's (the communicator's selector,
// topology/selector.hpp, for the group's links and the message size).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/feedback_store.hpp"
#include "strata/compression.hpp"
#include "strata/types.hpp"

namespace strata::collectives {

struct Algorithm;  // registry.hpp

// alltoall: what goes to and comes from each member of the group, in elements, indexed
// by group index. Shared, so copying the arguments into the engine's queue stays cheap.
struct Splits {
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;
};

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
  std::shared_ptr<const Splits> splits;  // alltoall only
  // Compressed allreduce: where the residuals of what the codec dropped are kept (a
  // quant::ErrorFeedback); null: they are lost.
  FeedbackStore* feedback = nullptr;
};

// How a call that names no algorithm gets one. The communicator hands its selector down
// in every Context it builds; a context without one uses threshold_chooser().
class Chooser {
 public:
  virtual ~Chooser() = default;
  virtual const Algorithm& choose(const Group& g, const CollArgs& a) const = 0;
};

// STRATA_SMALL_BYTES's default (core/settings.def; test_config holds them equal): what
// code without a communicator's settings takes as small.
inline constexpr std::size_t kDefaultSmallBytes = 64 << 10;

// The fixed rule the selector replaced (log(p)-step algorithms up to small_bytes, rings
// and chains above): the choice of code that drives the algorithms without a
// communicator (with the default), and strata-plan's baseline (with STRATA_SMALL_BYTES).
const Chooser& threshold_chooser();
const Algorithm& threshold_algorithm(const CollArgs& a, std::size_t small_bytes = kDefaultSmallBytes);

// The one place a call's algorithm is settled: the one it names, checked against the
// group (InvalidArgument naming `what` and the valid ones), else the chooser's.
const Algorithm& resolve_algorithm(const Chooser& chooser, const Group& g, const CollArgs& a,
                                   const std::string& what);

// Runs a over g with resolve_algorithm(ctx.chooser(), ...).
Steps run_collective(Context& ctx, const Group& g, const CollArgs& a);

}  // namespace strata::collectives
