#include "core/call_plan.hpp"

#include "collectives/registry.hpp"
#include "hierarchy/hierarchical.hpp"

namespace strata::detail {

std::uint8_t CallPlan::fingerprint_id() const {
  return declared ? static_cast<std::uint8_t>(static_cast<int>(declared->id) + 1) : std::uint8_t{0};
}

CallPlan settle_plan(const PlanInputs& in, const collectives::CollArgs& a, const std::string& what) {
  CallPlan p;
  p.declared = a.algorithm;
  if (a.kind == CollectiveKind::alltoall) {
    p.route = CallPlan::Route::pairwise;
    return p;
  }
  if (a.compression && a.compression->scope == Compression::Scope::everywhere) {
    p.route = CallPlan::Route::flat;
    p.algorithm = &collectives::algorithm(collectives::AlgorithmId::compressed);
    return p;
  }
  if (in.levels && hierarchy::plan_runs(*in.levels, a.kind)) {
    p.route = CallPlan::Route::hierarchical;
    return p;
  }
  // Flat. A flat communicator settles the selector's choice here, so it travels in the
  // fingerprint; with a hierarchical plan (a collective it leaves flat) only a named one does.
  p.route = CallPlan::Route::flat;
  p.algorithm = &collectives::resolve_algorithm(*in.selector, *in.world, a, what);
  if (!in.levels) p.declared = p.algorithm;
  // A call that names no algorithm lets the tuner try the model's close seconds.
  // Region-scoped compression with every rank in one region runs exact, untried.
  const bool lossy = a.compression && a.compression->lossy();
  if (in.tuner && !a.algorithm && !in.levels && !lossy) {
    p.tuned = true;
    if (const auto* pick = in.tuner->next(a.kind, a.dtype, a.count, *in.world)) p.algorithm = pick;
  }
  return p;
}

}  // namespace strata::detail
