#include "collectives/dispatch.hpp"

#include "collectives/algorithms.hpp"
#include "collectives/registry.hpp"
#include "core/config.hpp"
#include "strata/errors.hpp"

namespace strata::collectives {

void run_collective(Context& ctx, const Group& g, const CollArgs& a) {
  if (a.algorithm) {
    // The algorithm is part of the fingerprint, so ranks naming different ones get a
    // MismatchError rather than messages that do not fit.
    // Communicator checks this before queueing; this guards plans that pass it along.
    if (!a.algorithm->supports(a.kind, a.dtype, a.count, g.size()))
      throw InvalidArgument(ctx.what() + ": algorithm " + a.algorithm->name + " does not support it over " +
                            std::to_string(g.size()) + " ranks (valid: " +
                            algorithm_names(a.kind, a.dtype, a.count, g.size()) + ")");
    return a.algorithm->run(ctx, g, a);
  }
  static const std::size_t small = static_cast<std::size_t>(config::get_int("small_bytes"));
  const std::size_t bytes = a.count * dtype_size(a.dtype);
  switch (a.kind) {
    case CollectiveKind::allreduce:
      if (bytes <= small) return recursive_doubling_allreduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
      return ring_allreduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
    case CollectiveKind::reduce_scatter:
      return ring_reduce_scatter(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
    case CollectiveKind::allgather:
      return ring_allgather(ctx, g, a.send, a.recv, a.count, a.dtype);
    case CollectiveKind::broadcast:
      if (bytes <= small) return binomial_broadcast(ctx, g, a.send, a.recv, a.count, a.dtype, a.root);
      return chain_broadcast(ctx, g, a.send, a.recv, a.count, a.dtype, a.root);
    case CollectiveKind::reduce:
      if (bytes <= small) return binomial_reduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op, a.root);
      return ring_reduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op, a.root);
    case CollectiveKind::barrier:
      return dissemination_barrier(ctx, g);
    default:
      throw InvalidArgument(std::string("not a collective: ") + to_string(a.kind));
  }
}

}  // namespace strata::collectives
