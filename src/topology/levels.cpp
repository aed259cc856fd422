#include "topology/levels.hpp"

#include <algorithm>
#include <array>
#include <map>

#include "strata/errors.hpp"

namespace strata::topology {
namespace {

// Coordinates of a rank: region, cluster in region, rack in cluster, host in rack, index on
// host. Each is numbered in order of the unit's lowest rank.
constexpr int kDepth = 5;
using Coords = std::array<int, kDepth>;

struct Unit {
  int index = 0;     // within its parent
  int children = 0;  // units (or ranks, for hosts) directly inside it
  std::string name;  // its path, "-" for unnamed parts
  int first_rank = 0;
};

const char* const kUnitKind[] = {"region", "cluster", "rack", "host"};
const char* const kChildKind[] = {"clusters", "racks", "hosts", "ranks"};

struct Numbering {
  std::vector<Coords> coords;
  std::array<std::map<std::vector<std::string>, Unit>, kDepth - 1> units;  // by path prefix
};

std::string join_path(const std::vector<std::string>& path) {
  std::string s;
  for (const auto& part : path) s += (s.empty() ? "" : "/") + (part.empty() ? std::string("-") : part);
  return s;
}

Numbering number(const std::vector<Locality>& ls) {
  Numbering n;
  int top = 0;
  for (std::size_t r = 0; r < ls.size(); ++r) {
    const auto& l = ls[r];
    const std::array<const std::string*, 4> parts{&l.region, &l.cluster, &l.rack, &l.host};
    std::vector<std::string> path;
    Coords c{};
    int* sibling_count = &top;
    for (int d = 0; d < kDepth - 1; ++d) {
      path.push_back(*parts[static_cast<std::size_t>(d)]);
      auto [it, fresh] = n.units[static_cast<std::size_t>(d)].try_emplace(path);
      if (fresh) {
        it->second.index = (*sibling_count)++;
        it->second.name = join_path(path);
        it->second.first_rank = static_cast<int>(r);
      }
      c[static_cast<std::size_t>(d)] = it->second.index;
      sibling_count = &it->second.children;
    }
    c[kDepth - 1] = (*sibling_count)++;
    n.coords.push_back(c);
  }
  return n;
}

// Empty when every unit at each depth has as many children as any other.
std::string irregularity(const Numbering& n) {
  for (std::size_t d = 0; d < n.units.size(); ++d) {
    // In rank order, so the message names the first unit that breaks the pattern.
    std::vector<const Unit*> units;
    for (const auto& [path, u] : n.units[d]) units.push_back(&u);
    std::sort(units.begin(), units.end(),
              [](const Unit* a, const Unit* b) { return a->first_rank < b->first_rank; });
    const Unit& first = *units.front();
    for (const Unit* u : units)
      if (u->children != first.children)
        return std::string(kUnitKind[d]) + "s differ in " + kChildKind[d] + ": '" + first.name + "' has " +
               std::to_string(first.children) + ", '" + u->name + "' has " + std::to_string(u->children);
  }
  return {};
}

struct LevelSpec {
  Level level;
  int vary_from, vary_to;  // coordinates [from, to) vary inside a group
};
// The region level varies region and cluster together: clusters are only joined there.
constexpr LevelSpec kLevels[] = {
    {Level::host, 4, 5}, {Level::rack, 3, 4}, {Level::cluster, 2, 3}, {Level::region, 0, 2}};

// Ranks agreeing on every coordinate outside the varying ones form a group, ordered by the
// varying ones. With leaders_only, only ranks at index 0 of every inner coordinate (the
// lowest rank of their host, rack or cluster) take part.
LevelGroups make_level(const Numbering& n, const LevelSpec& s, bool leaders_only) {
  LevelGroups lg;
  lg.level = s.level;
  lg.group_of.assign(n.coords.size(), -1);
  std::map<Coords, int> by_key;
  for (std::size_t r = 0; r < n.coords.size(); ++r) {
    const Coords& c = n.coords[r];
    if (leaders_only && std::any_of(c.begin() + s.vary_to, c.end(), [](int v) { return v != 0; })) continue;
    Coords key = c;
    std::fill(key.begin() + s.vary_from, key.begin() + s.vary_to, -1);
    auto [it, fresh] = by_key.try_emplace(key, static_cast<int>(lg.groups.size()));
    if (fresh) lg.groups.emplace_back();
    lg.groups[static_cast<std::size_t>(it->second)].push_back(static_cast<int>(r));
    lg.group_of[r] = it->second;
  }
  for (auto& g : lg.groups)
    std::stable_sort(g.begin(), g.end(), [&](int a, int b) {
      const Coords& ca = n.coords[static_cast<std::size_t>(a)];
      const Coords& cb = n.coords[static_cast<std::size_t>(b)];
      return std::lexicographical_compare(ca.begin() + s.vary_from, ca.begin() + s.vary_to,
                                          cb.begin() + s.vary_from, cb.begin() + s.vary_to);
    });
  return lg;
}

std::vector<LevelGroups> make_levels(const Numbering& n, bool leaders_only) {
  std::vector<LevelGroups> out;
  for (const auto& s : kLevels) {
    LevelGroups lg = make_level(n, s, leaders_only);
    if (std::any_of(lg.groups.begin(), lg.groups.end(), [](const auto& g) { return g.size() > 1; }))
      out.push_back(std::move(lg));
  }
  return out;
}

}  // namespace

const char* to_string(Level l) {
  switch (l) {
    case Level::host:
      return "host";
    case Level::rack:
      return "rack";
    case Level::cluster:
      return "cluster";
    case Level::region:
      return "region";
  }
  return "?";
}

Layout derive_layout(const std::vector<Locality>& localities) {
  if (localities.empty()) throw InvalidArgument("topology: no ranks to derive levels from");
  const Numbering n = number(localities);
  Layout out;
  out.irregularity = irregularity(n);
  out.uniform = out.irregularity.empty();
  if (out.uniform) out.split_rail = make_levels(n, false);
  out.leader = make_levels(n, true);
  return out;
}

std::vector<RankGroup> groups_of(const std::vector<LevelGroups>& levels, int rank) {
  std::vector<RankGroup> out;
  for (const auto& lg : levels) {
    if (rank < 0 || rank >= static_cast<int>(lg.group_of.size()))
      throw InvalidArgument("topology: rank " + std::to_string(rank) + " is out of range");
    const int g = lg.group_of[static_cast<std::size_t>(rank)];
    if (g < 0) continue;
    const auto& members = lg.groups[static_cast<std::size_t>(g)];
    const auto me = std::find(members.begin(), members.end(), rank) - members.begin();
    out.push_back(RankGroup{lg.level, members, static_cast<int>(me)});
  }
  return out;
}

std::vector<Locality> synthesize_uniform(int regions, int hosts_per_region, int ranks_per_host) {
  if (regions < 1 || hosts_per_region < 1 || ranks_per_host < 1)
    throw InvalidArgument("topology: regions, hosts and ranks per host must be at least 1");
  std::vector<Locality> out;
  for (int g = 0; g < regions; ++g)
    for (int h = 0; h < hosts_per_region; ++h)
      for (int k = 0; k < ranks_per_host; ++k)
        out.push_back(Locality{"region" + std::to_string(g), "", "",
                               "region" + std::to_string(g) + "-host" + std::to_string(h), k});
  return out;
}

}  // namespace strata::topology
