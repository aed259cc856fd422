#include "hierarchy/plan_cost.hpp"

#include <limits>

namespace strata::hierarchy {

std::vector<topology::LevelCost> level_costs(const topology::Selector& sel, const Plan& plan) {
  std::vector<topology::LevelCost> out;
  for (const auto& lg : plan.levels) {
    std::size_t largest = 0, at = 0;
    for (std::size_t k = 0; k < lg.groups.size(); ++k)
      if (lg.groups[k].size() > largest) largest = lg.groups[k].size(), at = k;
    collectives::Group g;
    g.ranks = lg.groups[at];
    out.push_back(topology::LevelCost{lg.level, static_cast<int>(largest), sel.group_cost(g)});
  }
  return out;
}

bool prefers_latency_path(const topology::Selector& sel, const std::vector<topology::LevelCost>& levels,
                          CollectiveKind kind, std::size_t bytes) {
  if (bytes > sel.figures().small_bytes) return false;
  const double n = static_cast<double>(bytes);
  const auto always = std::numeric_limits<std::size_t>::max();
  return topology::predict_split_rail(kind, levels, n, always).total() <=
         topology::predict_split_rail(kind, levels, n, 0).total();
}

topology::Cost predict_plan(const topology::Selector& sel, const Plan& plan, CollectiveKind kind, double bytes) {
  const auto levels = level_costs(sel, plan);
  if (plan.kind == Plan::Kind::leader) return topology::predict_leader(kind, levels, bytes);
  const bool latency = prefers_latency_path(sel, levels, kind, static_cast<std::size_t>(bytes));
  return topology::predict_split_rail(kind, levels, bytes, latency ? std::numeric_limits<std::size_t>::max() : 0);
}

}  // namespace strata::hierarchy
