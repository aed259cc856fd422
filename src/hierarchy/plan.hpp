// Which hierarchical plan a communicator runs, and the groups it runs it over (DESIGN §4).
//
// Uniform layouts get the split-rail plan: every rank is in one group per level, so every
// rank (and every host's NIC) carries an equal share at every level, the WAN included.
// Uneven layouts (a region with more hosts, a host with more ranks) get the leader plan:
// data climbs to the lowest rank of each host, rack and cluster, the cluster leaders
// run the collective across regions, and results flow back down. It is correct for any
// shape; only the leaders' links carry the WAN stage.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/dispatch.hpp"
#include "hierarchy/level_engine.hpp"
#include "strata/locality.hpp"
#include "topology/cost_model.hpp"
#include "topology/levels.hpp"
#include "topology/region_order.hpp"

namespace strata::hierarchy {

struct Plan {
  enum class Kind { split_rail, leader };
  Kind kind = Kind::split_rail;
  int world_size = 1;
  int rank = 0;
  // Every level's groups over all ranks, innermost first; the last one spans regions.
  std::vector<topology::LevelGroups> levels;
  // This rank's group at each level of `levels` (split rail: at every level; leader:
  // member 0 is the leader, and a rank is absent from levels above the one it leads).
  // Indexed like `levels`; size 0 where this rank sits the level out.
  std::vector<collectives::Group> mine;
  // What runs each level (level_engine.hpp), indexed like `levels`; null: the host's.
  std::vector<const LevelEngine*> engines;
  // What the communicator's cost model charges each level (plan_cost.hpp), priced once
  // when its selector is built. Unset where none was: split rail then takes its latency
  // path by STRATA_SMALL_BYTES alone.
  struct Pricing {
    std::vector<topology::LevelCost> levels;  // innermost first
    std::size_t small_bytes = 0;              // the figures' STRATA_SMALL_BYTES
  };
  std::optional<Pricing> pricing;
  // The allreduce pipeline's segment (STRATA_SEGMENT_BYTES, the communicator's setting),
  // and where no pricing was made, the latency path's limit.
  std::size_t segment_bytes = 4 << 20;
  std::size_t small_bytes = collectives::kDefaultSmallBytes;
  // The order the top level's groups cross regions in (order_regions), once known.
  std::optional<topology::RegionRing> region_ring;

  int depth() const { return static_cast<int>(levels.size()); }
  const LevelEngine& engine(int level) const {
    const auto i = static_cast<std::size_t>(level);
    return i < engines.size() && engines[i] ? *engines[i] : host_engine();
  }
  // Position of `rank` in its group at level i, or -1 if it sits that level out.
  int position(int level, int rank) const;
  std::string describe() const;  // one line for logs
};

// A plan's own engines, on host memory.
class PlanEngines final : public CallEngines {
 public:
  explicit PlanEngines(const Plan& p) : plan_(p) {}
  const LevelEngine& level(int i) const override { return plan_.engine(i); }
  void copy(void* dst, const void* src, std::size_t bytes) const override;
  void* scratch(collectives::Context& ctx, std::size_t bytes) const override { return ctx.scratch(3, bytes); }
  bool on_device() const override { return false; }

 private:
  const Plan& plan_;
};

// STRATA_ALGO as the hierarchy sees it: the plan word among its rules (auto when none);
// throws InvalidArgument naming STRATA_ALGO and the token that does not parse.
enum class Choice { automatic, hierarchical, flat };
Choice parse_choice(const std::string& value);

// The plan for `rank`, or nothing when the flat algorithms should run: ranks all in one
// region, or Choice::flat. Choice::hierarchical on a single region is an InvalidArgument.
std::optional<Plan> make_plan(const std::vector<Locality>& localities, int rank, Choice choice);

// Puts the members of every top-level group in the order of the best ring over their
// regions (topology::best_ring; members of one region keep rank order), so that a ring or
// chain across regions avoids the slow pairs of the WAN matrix. Every rank must hold the
// same figures (the probe agrees on them) and call it before the groups are used.
void order_regions(Plan& plan, const std::vector<Locality>& localities, const topology::Figures& f);

}  // namespace strata::hierarchy
