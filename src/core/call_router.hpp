// Runs one collective call on the engine thread: settles its plan (call_plan.hpp), sends
// its fingerprint to the next rank and checks the previous rank's, runs the plan's route,
// times a tuned run for the online tuner, and holds a broadcast's or reduce's root until
// every rank passed its check. What fails comes out as it is; the communicator settles it
// (failure settlement stays with CommImpl, which knows the control mesh).
#pragma once

#include <chrono>
#include <string>

#include "collectives/context.hpp"
#include "core/call_plan.hpp"
#include "core/fingerprint.hpp"
#include "quant/error_feedback.hpp"
#include "transport/transport.hpp"

namespace strata::detail {

class CallRouter {
 public:
  // The communicator's parts a call runs with; all outlive the router.
  struct Parts {
    transport::Transport* transport = nullptr;
    int size = 1;  // ranks (dedicated servers not counted)
    collectives::Scratch* scratch = nullptr;
    std::size_t chunk_bytes = 0;
    PlanInputs plan;
    quant::ErrorFeedback* feedback = nullptr;
  };
  explicit CallRouter(Parts p);

  // The fingerprint of call `seq` (its algorithm not yet known) for its description.
  static Fingerprint fingerprint(std::uint64_t seq, const collectives::CollArgs& a);

  // Runs the call whose fingerprint (less the algorithm) is `fp`. On failure rethrows
  // with `absent` saying, when it is so, that the previous rank never started the call.
  // `device`: a device call's engines, for a call the hierarchical plan runs on device
  // memory (hierarchy::plan_runs_on_device); null: the plan's own, on host memory.
  void run(Fingerprint fp, const collectives::CollArgs& a, transport::Clock::time_point deadline,
           std::string& absent, const hierarchy::CallEngines* device = nullptr);

 private:
  void run_plan(collectives::Context& ctx, const CallPlan& plan, const Fingerprint& fp, const collectives::CollArgs& a,
                const std::function<void()>& checked, const hierarchy::CallEngines* device);
  // Every rank but the root tells the root it passed its check of the call; the root waits.
  void confirm_to_root(collectives::Context& ctx, int root);

  Parts p_;
};

}  // namespace strata::detail
