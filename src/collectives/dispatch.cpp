#include "collectives/dispatch.hpp"

#include "collectives/registry.hpp"
#include "core/config.hpp"
#include "strata/errors.hpp"
#include "topology/selector.hpp"

namespace strata::collectives {

namespace {

thread_local const topology::Selector* current_selector = nullptr;

}  // namespace

const Algorithm& threshold_algorithm(const CollArgs& a) {
  static const std::size_t small = static_cast<std::size_t>(config::get_int("small_bytes"));
  const bool is_small = a.count * dtype_size(a.dtype) <= small;
  switch (a.kind) {
    case CollectiveKind::allreduce:
      return algorithm(is_small ? AlgorithmId::recursive_doubling : AlgorithmId::ring);
    case CollectiveKind::broadcast:
      return algorithm(is_small ? AlgorithmId::binomial : AlgorithmId::chain);
    case CollectiveKind::reduce:
      return algorithm(is_small ? AlgorithmId::binomial : AlgorithmId::ring);
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::allgather:
      return algorithm(AlgorithmId::ring);
    case CollectiveKind::barrier:
      return algorithm(AlgorithmId::dissemination);
    default:
      throw InvalidArgument(std::string("not a collective: ") + to_string(a.kind));
  }
}

SelectorScope::SelectorScope(const topology::Selector* s) : previous_(current_selector) { current_selector = s; }
SelectorScope::~SelectorScope() { current_selector = previous_; }

const topology::Selector* active_selector() { return current_selector; }

const Algorithm& default_algorithm(const Group& g, const CollArgs& a) {
  if (a.kind != CollectiveKind::barrier && a.kind > CollectiveKind::reduce)
    throw InvalidArgument(std::string("not a collective: ") + to_string(a.kind));
  if (current_selector) return current_selector->choose(a.kind, a.dtype, a.count, g);
  return threshold_algorithm(a);
}

void run_collective(Context& ctx, const Group& g, const CollArgs& a) {
  if (a.algorithm) {
    // The algorithm is part of the fingerprint, so ranks naming different ones get a
    // MismatchError rather than messages that do not fit.
    // Communicator checks this before queueing; this guards plans that pass it along.
    if (!a.algorithm->supports(a.kind, a.dtype, a.count, g.shape()))
      throw InvalidArgument(ctx.what() + ": algorithm " + a.algorithm->name + " does not support it over " +
                            std::to_string(g.size()) + " ranks and " + std::to_string(g.servers.size()) +
                            " dedicated servers (valid: " + algorithm_names(a.kind, a.dtype, a.count, g.shape()) + ")");
    return a.algorithm->run(ctx, g, a);
  }
  default_algorithm(g, a).run(ctx, g, a);
}

}  // namespace strata::collectives
