// Picks the flat algorithm for one collective over one group and runs it: the one the
// call names, else the selector's choice (topology/selector.hpp) for the group's links
// and the message size.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "collectives/context.hpp"
#include "strata/compression.hpp"
#include "strata/types.hpp"

namespace strata::topology {
class Selector;
}

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
};

void run_collective(Context& ctx, const Group& g, const CollArgs& a);

// The selector run_collective consults on this thread while the scope lives. Plans
// build the CollArgs of their per-level calls themselves; the communicator installs its
// selector around each operation so those calls are chosen for their level's links too.
// Without one (code driving the algorithms directly) the choice is the fixed size
// threshold the selector replaced: STRATA_SMALL_BYTES.
class SelectorScope {
 public:
  explicit SelectorScope(const topology::Selector* s);
  ~SelectorScope();
  SelectorScope(const SelectorScope&) = delete;
  SelectorScope& operator=(const SelectorScope&) = delete;

 private:
  const topology::Selector* previous_;
};

// The selector of the innermost live SelectorScope on this thread, or nullptr.
const topology::Selector* active_selector();

// The algorithm run_collective runs for a call that names none, over g.
const Algorithm& default_algorithm(const Group& g, const CollArgs& a);
// The fixed rule the selector replaced (log(p)-step algorithms up to STRATA_SMALL_BYTES,
// rings and chains above): the choice outside a SelectorScope, and strata-plan's baseline.
const Algorithm& threshold_algorithm(const CollArgs& a);

}  // namespace strata::collectives
