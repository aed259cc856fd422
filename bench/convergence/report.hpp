// What the experiment prints and writes: the per-step CSV and one summary line per run.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "training.hpp"

namespace strata::convergence {

// Mean training loss over the last `tail` fraction of steps (at least one step): single
// batches are noisy, and all runs see the same batches, so the means compare fairly.
double final_loss(const RunResult& r, double tail);
// The last held-out evaluation (taken after the final step).
const StepRecord* last_evaluation(const RunResult& r);

void write_csv(std::ostream& out, const std::vector<RunResult>& runs);

// One line per run, the ratio of each run's final loss to the first run's (the baseline),
// and whether `target_run` came within `target` (a fraction) of it, in either direction:
// a compressed run that ends much lower is following another trajectory, not matching.
void print_summary(std::ostream& out, const std::vector<RunResult>& runs, double tail,
                   const std::string& target_run, double target);

}  // namespace strata::convergence
