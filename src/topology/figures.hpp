// What probing measures and how it becomes the cost model's figures, as pure functions
// of layouts and numbers: which pairs of ranks stand for each link class, the text
// record ranks exchange and cache, and laying measured and file figures over the built-in
// ones. The probing itself (sockets, time, the store) is probe/probe.hpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "strata/locality.hpp"
#include "topology/cost_model.hpp"
#include "topology/topology_file.hpp"

namespace strata::topology {

// Two ranks whose link stands for a class; `from` sends first. WAN pairs name regions
// by their index in the order of their lowest rank.
struct ProbePair {
  LinkClass cls = LinkClass::shm;
  int from = 0, to = 0;                // ranks
  int region_a = -1, region_b = -1;    // WAN pairs only
  // Pairs that ping-pong alongside, unrecorded: the other ranks of the same hosts, so the
  // pair sees its host as busy as a collective makes it (ranks sharing cores or a NIC).
  std::vector<std::pair<int, int>> companions;
};

// Every pair worth probing for these localities, the same list on every rank: the first
// host with two ranks (its other ranks paired up alongside), the first region with two
// hosts (their other ranks paired up alongside), and every pair of regions by their
// lowest ranks (only region 0 to each other one past 8 regions, to stay within the time
// bound).
std::vector<ProbePair> probe_pairs(const std::vector<Locality>& localities);

// Regions in order of their lowest rank.
std::vector<std::string> region_order(const std::vector<Locality>& localities);

struct PairResult {
  ProbePair pair;
  LinkCost cost;
  bool beta_measured = false;  // false: the large message did not fit the time bound
  bool gap_measured = false;   // false: no time was left for a burst
  int small_iters = 0, large_iters = 0;
};

// What probing found, before built-in and file figures are laid under and over it.
struct Measured {
  double gamma = 0;  // 0: not measured
  std::vector<PairResult> pairs;
};
std::string serialize(const Measured& m);
std::optional<Measured> parse_measured(const std::string& text);  // nullopt if malformed

// A parent communicator's figures for a child made of some of its ranks and new ones
// (shrink, grow): the pairs the child would probe (`needed`), each found among the
// parent's by link class and, across regions, by the two regions' names; regions renumbered
// from `from_regions` to the child's `to_regions`. nullopt when any needed pair was not
// measured by the parent (a region it never had): the child probes instead.
std::optional<Measured> carry_over(const Measured& parent, const std::vector<std::string>& from_regions,
                                   const std::vector<ProbePair>& needed, const std::vector<std::string>& to_regions);

// Lays the measured figures and then a topology file's over `f`; `regions` orders the
// WAN matrix. Pure, so tools can build the same figures without a communicator.
void apply_measured(Figures& f, const Measured& m, Source source);
void apply_file(Figures& f, const TopologyFile& file);
void set_regions(Figures& f, std::vector<std::string> regions);

}  // namespace strata::topology
