// Link probing at communicator creation: for each link class in use (same host, hosts of
// a region, each pair of regions) one representative pair of ranks ping-pongs a small
// message (α) and a large one (β), and fans small ones out (the gap), bounded in time, and every rank reads every pair's result from
// the rendezvous store, so all of them build the same selector. Rank 0 keeps the result
// in a cache file keyed by the layout, so creating the same communicator again does not
// probe again. Figures a topology file gives are not probed: the file wins.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "strata/locality.hpp"
#include "topology/cost_model.hpp"
#include "topology/topology_file.hpp"
#include "transport/transport.hpp"

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

struct ProbeReport {
  enum class How { probed, cached, skipped };
  How how = How::skipped;
  std::string why;          // skipped: the reason; cached: the file
  double seconds = 0;       // wall time this rank spent agreeing on figures
  Measured measured;
};

struct ProbeInputs {
  int rank = 0;
  int size = 1;
  const std::vector<Locality>* localities = nullptr;
  transport::Transport* transport = nullptr;
  bootstrap::Store* store = nullptr;  // prefixed for this communicator
  transport::Clock::time_point deadline{};
  const TopologyFile* file = nullptr;  // STRATA_TOPO_FILE, if any
  std::string cache_key;               // what else makes figures differ: transport, WAN shaping
};

// The figures every rank of the communicator uses: built-in, then probed (or cached),
// then the topology file's. Collective over all ranks: each must call it.
Figures agree_figures(const ProbeInputs& in, ProbeReport* report = nullptr);

// Lays the measured figures and then a topology file's over `f`; `regions` orders the
// WAN matrix. Pure, so tools can build the same figures without a communicator.
void apply_measured(Figures& f, const Measured& m, Source source);
void apply_file(Figures& f, const TopologyFile& file);
void set_regions(Figures& f, std::vector<std::string> regions);

// γ of this process: an f32 sum over buffers larger than a cache level, measured once.
double measure_gamma();

}  // namespace strata::topology
