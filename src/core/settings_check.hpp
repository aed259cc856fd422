// Settings checked at creation on every rank, and agreed across ranks, before anything
// waits on them. A rank whose settings are refused still publishes its record (saying
// what it refuses) and then fails; the others read that in the same rendezvous and fail
// with it, instead of waiting for a rank that already gave up. Settings that shape the
// ranks' traffic must be alike everywhere: one that differs fails every rank, naming it.
#pragma once

#include <chrono>
#include <optional>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "strata/communicator.hpp"
#include "strata/compression.hpp"
#include "topology/topology_file.hpp"
#include "transport/factory.hpp"

namespace strata::detail {

struct SettingsCheck {
  std::vector<std::string> refused;  // "STRATA_HEARTBEAT_S=-5 is outside [0, 86400]"
  // The settings every rank must share, as (variable, value written or default).
  std::vector<std::pair<std::string, std::string>> shared;

  // What this rank runs with; where a setting is refused, its default, so that creation
  // gets as far as telling the others.
  TransportKind transport = TransportKind::ucx;
  std::chrono::milliseconds timeout{300000};
  std::chrono::milliseconds heartbeat{10000};
  std::chrono::milliseconds keepalive{15000};
  std::size_t chunk_bytes = 1 << 20;
  std::size_t small_bytes = 64 << 10;    // STRATA_SMALL_BYTES: split rail's latency path
  std::size_t segment_bytes = 4 << 20;   // STRATA_SEGMENT_BYTES: split rail's pipeline segment
  bool probe = true;                     // STRATA_PROBE
  double probe_cache_s = 3600;           // STRATA_PROBE_CACHE_S
  double probe_budget_s = 0.2;           // STRATA_PROBE_MS
  std::string topo_file;                 // STRATA_TOPO_FILE
  transport::FabricSettings fabric;      // STRATA_UNEXPECTED_BYTES, STRATA_SHARED_MEMORY
  int servers = 0;
  int mesh_full_upto = 16;               // STRATA_MESH_FULL_UPTO
  Compression compression;

  // The two strings a rank publishes in its record.
  std::string refused_text() const;
  std::string shared_text() const;
};

// The topology file STRATA_TOPO_FILE names (InvalidArgument naming what is wrong with
// it), or none.
std::optional<topology::TopologyFile> topology_file(const SettingsCheck& s, int world_size);

// Reads every setting of the registry (core/settings.def) and the rules beyond its
// ranges (a heartbeat period of 0 or at least 1 s, STRATA_COMPRESS that parses); never throws.
SettingsCheck check_settings(const CommOptions& opts);

// What every worker published (refused_text, shared_text by rank; empty for a rank that
// published none): "" when all is well, else the reason creation fails on `me`, naming
// the rank, the setting and the values.
std::string settings_verdict(const std::vector<std::string>& refused, const std::vector<std::string>& shared, int me);

}  // namespace strata::detail
