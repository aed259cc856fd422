#include "hierarchy/plan.hpp"

#include <algorithm>
#include <set>

#include "strata/errors.hpp"
#include "topology/algorithm_rules.hpp"

namespace strata::hierarchy {

int Plan::position(int level, int r) const {
  const auto& lg = levels[static_cast<std::size_t>(level)];
  const int g = lg.group_of[static_cast<std::size_t>(r)];
  if (g < 0) return -1;
  const auto& members = lg.groups[static_cast<std::size_t>(g)];
  return static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
}

std::string Plan::describe() const {
  std::string s = kind == Kind::split_rail ? "split-rail" : "leader";
  s += " plan:";
  for (std::size_t i = 0; i < levels.size(); ++i) {
    s += std::string(" ") + topology::to_string(levels[i].level) + "[";
    s += mine[i].ranks.empty() ? "-" : std::to_string(mine[i].size()) + " ranks";
    s += "]";
  }
  return s;
}

Choice parse_choice(const std::string& v) {
  // STRATA_ALGO is the override grammar (topology/algorithm_rules.hpp); its plan word,
  // if any, is the hierarchy's business and the algorithm rules the selector's.
  const auto rules = topology::parse_algorithm_rules(v, "STRATA_ALGO", true);
  switch (rules.plan.value_or(topology::PlanChoice::automatic)) {
    case topology::PlanChoice::hierarchical: return Choice::hierarchical;
    case topology::PlanChoice::flat: return Choice::flat;
    default: return Choice::automatic;
  }
}

std::optional<Plan> make_plan(const std::vector<Locality>& localities, int rank, Choice choice) {
  if (choice == Choice::flat) return std::nullopt;
  std::set<std::string> regions;
  for (const auto& l : localities) regions.insert(l.region);
  if (regions.size() < 2) {
    if (choice == Choice::hierarchical)
      throw InvalidArgument("STRATA_ALGO=hier needs ranks in several regions: all " +
                            std::to_string(localities.size()) + " ranks are in region '" +
                            *regions.begin() + "'");
    return std::nullopt;
  }
  auto layout = topology::derive_layout(localities);
  Plan p;
  p.world_size = static_cast<int>(localities.size());
  p.rank = rank;
  p.kind = layout.uniform ? Plan::Kind::split_rail : Plan::Kind::leader;
  p.levels = layout.uniform ? std::move(layout.split_rail) : std::move(layout.leader);
  for (std::size_t i = 0; i < p.levels.size(); ++i) {
    collectives::Group g;
    const int pos = p.position(static_cast<int>(i), rank);
    if (pos >= 0) {
      const auto& lg = p.levels[i];
      g.ranks = lg.groups[static_cast<std::size_t>(lg.group_of[static_cast<std::size_t>(rank)])];
      g.me = pos;
    }
    p.mine.push_back(std::move(g));
  }
  return p;
}

}  // namespace strata::hierarchy
