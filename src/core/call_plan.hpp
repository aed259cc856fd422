// How one call runs, settled in one place. settle_plan() runs on the engine thread in the
// order calls execute, so every rank settles the same plan for the same call (the online
// tuner's turns included); the call router (call_router.hpp) then runs exactly that plan
// and re-decides nothing. Per-level calls inside a hierarchical plan pick their own
// algorithms from the same selector (hierarchy/).
#pragma once

#include <cstdint>
#include <string>

#include "collectives/dispatch.hpp"
#include "core/fingerprint.hpp"
#include "hierarchy/plan.hpp"
#include "topology/selector.hpp"
#include "topology/tuner.hpp"

namespace strata::detail {

struct CallPlan {
  enum class Route : std::uint8_t {
    pairwise,      // alltoall: every byte has one destination, nothing to combine on the way
    hierarchical,  // the communicator's hierarchical plan (hierarchy/)
    flat,          // one registered algorithm over the world group (compressed allreduce
                   // included: the call's compression chooses it)
  };
  Route route = Route::flat;
  // What the call names, else (flat communicators) the selector's pick: travels in the
  // fingerprint, so ranks that would run different algorithms fail with a MismatchError.
  const collectives::Algorithm* declared = nullptr;
  // flat: what runs, which is `declared` unless the online tuner tries another candidate
  // or the call's compression asks for the compressed allreduce.
  const collectives::Algorithm* algorithm = nullptr;
  bool tuned = false;  // flat: the tuner chose; the run is timed and offered to it

  // The fingerprint's id for `declared` (0: none).
  std::uint8_t fingerprint_id() const;
};

// What a plan is settled from: the communicator's selector, tuner (nullptr: off) and
// hierarchical plan (nullptr: flat), and the world group.
struct PlanInputs {
  const topology::Selector* selector = nullptr;
  topology::Tuner* tuner = nullptr;
  const hierarchy::Plan* levels = nullptr;
  const collectives::Group* world = nullptr;
};

// Engine thread only (the tuner's state advances). Throws InvalidArgument for an
// algorithm the call names that cannot run it.
CallPlan settle_plan(const PlanInputs& in, const collectives::CollArgs& a, const std::string& what);

}  // namespace strata::detail
