// strata-plan --measured: the cost model's predictions set against strata-perf --json runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "collectives/context.hpp"
#include "hierarchy/plan.hpp"
#include "topology/selector.hpp"

namespace strata::plan_tool {

// Predicted against measured for every algorithm and size; the pick's measured time
// against the measured best, beside the fixed threshold's pick and, when the files hold
// runs without --algo, what the library's automatic choice measured.
//
// With a hierarchical plan (ranks in several regions) the plan is one more column,
// "hier", measured by runs that the bench scripts label so (bench/wan/algo_sweep.sh), and
// it is the pick for the collectives it runs: the automatic choice across regions.
void print_measured(const topology::Selector& sel, const collectives::Group& world, const std::vector<std::string>& files,
                    bool markdown, const std::optional<hierarchy::Plan>& plan);

}  // namespace strata::plan_tool
