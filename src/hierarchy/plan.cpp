#include "hierarchy/plan.hpp"

#include <algorithm>
#include <set>

#include "collectives/algorithms.hpp"
#include "strata/errors.hpp"
#include "topology/algorithm_rules.hpp"

namespace strata::hierarchy {

void PlanEngines::copy(void* dst, const void* src, std::size_t bytes) const {
  collectives::copy_if_distinct(dst, src, bytes);
}

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
  if (region_ring && region_ring->order.size() > 2) {
    s += "; regions in ring order:";
    for (const auto& r : region_ring->order) s += " " + r;
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

void order_regions(Plan& plan, const std::vector<Locality>& localities, const topology::Figures& f) {
  if (plan.levels.empty()) return;
  auto& top = plan.levels.back();
  const auto region_of = [&](int r) -> const std::string& { return localities.at(static_cast<std::size_t>(r)).region; };
  std::vector<std::pair<int, std::string>> lowest;  // (lowest rank, region)
  for (const auto& g : top.groups)
    for (int r : g) {
      auto it = std::find_if(lowest.begin(), lowest.end(), [&](const auto& e) { return e.second == region_of(r); });
      if (it == lowest.end()) lowest.emplace_back(r, region_of(r));
      else it->first = std::min(it->first, r);
    }
  std::sort(lowest.begin(), lowest.end());
  std::vector<std::string> regions;
  for (auto& [r, name] : lowest) regions.push_back(name);
  plan.region_ring = topology::best_ring(f, regions);
  const auto& order = plan.region_ring->order;
  const auto place = [&](int r) { return std::find(order.begin(), order.end(), region_of(r)) - order.begin(); };
  for (auto& g : top.groups)
    std::stable_sort(g.begin(), g.end(), [&](int a, int b) { return place(a) < place(b); });
  const int at = top.group_of[static_cast<std::size_t>(plan.rank)];
  if (at < 0) return;
  collectives::Group& mine = plan.mine.back();
  mine.ranks = top.groups[static_cast<std::size_t>(at)];
  mine.me = plan.position(plan.depth() - 1, plan.rank);
}

}  // namespace strata::hierarchy
