// Link probing at communicator creation: for each link class in use (same host, hosts of
// a region, each pair of regions) one representative pair of ranks ping-pongs a small
// message (α) and a large one (β) and fans small ones out (the gap), bounded in time;
// every rank reads every pair's result from the rendezvous store, so all of them build
// the same selector. Rank 0 keeps the result
// in a cache file keyed by the layout, so creating the same communicator again does not
// probe again. Figures a topology file gives are not probed: the file wins.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "strata/locality.hpp"
#include "topology/cost_model.hpp"
#include "topology/figures.hpp"
#include "topology/topology_file.hpp"
#include "transport/transport.hpp"

namespace strata::probe {

struct ProbeReport {
  // inherited: from the communicator this one was shrunk or grown from, whose links
  // these ranks still use.
  enum class How { probed, cached, inherited, skipped };
  How how = How::skipped;
  std::string why;          // skipped: the reason; cached: the file
  double seconds = 0;       // wall time this rank spent agreeing on figures
  // What the budget bounds: this rank's own pairs' round trips after each pair's first
  // (connection set-up and the store's exchanges are in `seconds` only).
  double measuring_s = 0;
  double budget_s = 0;      // what probing was allowed (STRATA_PROBE_MS)
  topology::Measured measured;
};

// What a communicator measured, for the communicators shrunk or grown from it.
struct Inherited {
  topology::Measured measured;
  std::vector<std::string> regions;  // the order the measured WAN pairs number them in
};

struct ProbeInputs {
  int rank = 0;
  int size = 1;
  const std::vector<Locality>* localities = nullptr;
  transport::Transport* transport = nullptr;
  bootstrap::Store* store = nullptr;  // prefixed for this communicator
  transport::Clock::time_point deadline{};
  const topology::TopologyFile* file = nullptr;  // STRATA_TOPO_FILE, if any
  std::string cache_key;               // what else makes figures differ: transport, WAN shaping
  // The communicator's settings: STRATA_PROBE, STRATA_PROBE_CACHE_S, STRATA_PROBE_MS.
  bool enabled = true;
  double cache_max_age_s = 3600;
  double budget_s = 0.2;
  // The parent's figures (shrink, grow): used when they cover every pair this
  // communicator would probe, so a shrink after a loss does not probe a slow WAN again.
  const Inherited* inherited = nullptr;
};

// The figures every rank of the communicator uses: built-in, then probed (or cached),
// then the topology file's. Collective over all ranks: each must call it.
topology::Figures agree_figures(const ProbeInputs& in, ProbeReport* report = nullptr);

// γ of this process: an f32 sum over buffers larger than a cache level, measured once.
double measure_gamma();

}  // namespace strata::probe
