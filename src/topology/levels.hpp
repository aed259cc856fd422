// Levels and the groups a rank talks to at each (DESIGN §2). Pure functions of the
// ranks' localities, so every rank derives the same answer without talking.
#pragma once

#include <string>
#include <vector>

#include "strata/locality.hpp"

namespace strata::topology {

// Innermost first. A group at a level is made of ranks that differ in that level's
// coordinate only: `rack` joins different hosts of one rack, `cluster` different racks of
// one cluster, `region` different clusters — of other regions, and of the same region when
// a region has several clusters (the top level then mixes WAN and intra-region links).
enum class Level { host, rack, cluster, region };
const char* to_string(Level l);

// One level's partition of the ranks that take part in it.
struct LevelGroups {
  Level level = Level::host;
  std::vector<std::vector<int>> groups;
  std::vector<int> group_of;  // per rank: index into groups, or -1 when it sits this level out
};

struct Layout {
  // Every region has as many clusters, every cluster as many racks, every rack as many
  // hosts and every host as many ranks as any other.
  bool uniform = false;
  std::string irregularity;  // why not uniform, for logs and strata-topo

  // Uniform only ("split rail"): every rank is in one group per level; a group's members
  // hold the same index at every other level and are ordered by the varying one, so
  // position i in any group of a level means the same shard. Sizes multiply to the world.
  std::vector<LevelGroups> split_rail;

  // Any shape: ranks on a host, ordered by rank, then the leaders (lowest rank) of the
  // hosts of a rack, the leaders of the racks of a cluster, the leaders of all clusters.
  // A leader of an outer unit is also the leader of its inner units, so data can climb.
  std::vector<LevelGroups> leader;
};

// Levels whose groups all have size 1 are left out of both lists. Hosts, racks and
// clusters are identified by their whole path (region, cluster, rack, host); units are
// numbered in order of their lowest rank. Throws InvalidArgument on an empty world.
Layout derive_layout(const std::vector<Locality>& localities);

// The group `rank` is in at each level of `levels`, innermost first, in the shape of
// collectives::Group (ranks in order, me indexes them); levels it sits out are omitted.
struct RankGroup {
  Level level = Level::host;
  std::vector<int> ranks;
  int me = 0;
};
std::vector<RankGroup> groups_of(const std::vector<LevelGroups>& levels, int rank);

// A uniform layout for tests and what-if printing: regions × hosts_per_region ×
// ranks_per_host, one cluster and rack per region, ranks numbered region-major.
std::vector<Locality> synthesize_uniform(int regions, int hosts_per_region, int ranks_per_host);

}  // namespace strata::topology
