#include "collectives/dispatch.hpp"

#include "collectives/registry.hpp"
#include "strata/errors.hpp"

namespace strata::collectives {

const Algorithm& threshold_algorithm(const CollArgs& a, std::size_t small_bytes) {
  const bool is_small = a.count * dtype_size(a.dtype) <= small_bytes;
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

const char* to_string(EncodedExchange e) {
  return e == EncodedExchange::gather ? "gather" : "reduce_scatter";
}

EncodedExchange Chooser::encoded_exchange(const Group& g, const EncodedShape&) const {
  return g.size() > 2 ? EncodedExchange::reduce_scatter : EncodedExchange::gather;
}

namespace {

class ThresholdChooser final : public Chooser {
 public:
  const Algorithm& choose(const Group&, const CollArgs& a) const override { return threshold_algorithm(a); }
};

}  // namespace

const Chooser& threshold_chooser() {
  static const ThresholdChooser chooser;
  return chooser;
}

const Algorithm& resolve_algorithm(const Chooser& chooser, const Group& g, const CollArgs& a,
                                   const std::string& what) {
  if (a.kind != CollectiveKind::barrier && a.kind > CollectiveKind::reduce)
    throw InvalidArgument(std::string("not a collective: ") + to_string(a.kind));
  if (!a.algorithm) return chooser.choose(g, a);
  // The algorithm is part of the fingerprint, so ranks naming different ones get a
  // MismatchError rather than messages that do not fit. Communicator checks this before
  // queueing; this guards plans that pass it along.
  if (!a.algorithm->supports(a.kind, a.dtype, a.count, g.shape()))
    throw InvalidArgument(what + ": algorithm " + a.algorithm->name + " does not support it over " +
                          std::to_string(g.size()) + " ranks and " + std::to_string(g.servers.size()) +
                          " dedicated servers" + (g.shared_memory ? "" : ", which do not share memory") + " (valid: " + algorithm_names(a.kind, a.dtype, a.count, g.shape()) + ")");
  return *a.algorithm;
}

Steps run_collective(Context& ctx, const Group& g, const CollArgs& a) {
  return resolve_algorithm(ctx.chooser(), g, a, ctx.what()).run(ctx, g, a);
}

}  // namespace strata::collectives
