// The topology file (proto/topology.proto, protobuf text format): rank placements that
// override the environment's localities, per-level link figures, and the WAN matrix.
// Every error is a strata::InvalidArgument naming file, line, column and field.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "strata/locality.hpp"

namespace strata::topology {

// Where a construct sits in its file, for errors raised after parsing (1-based; 0 when
// the construct was not written in the file).
struct SourcePos {
  int line = 0;
  int column = 0;
};

struct Placement {
  int rank = 0;
  Locality where;  // local_rank is left 0; apply_placements recomputes it
  SourcePos pos;
};

struct LinkFigures {
  double latency_us = 0;
  double bandwidth_gbps = 0;
};

struct WanLink {
  std::string from_region;
  std::string to_region;
  double latency_ms = 0;  // one way
  double bandwidth_mbps = 0;
  double loss_percent = 0;
  SourcePos pos;          // of the entry this direction came from
  bool mirrored = false;  // filled in from the opposite direction
};

struct TopologyFile {
  std::string source;                 // file name, used as the prefix of errors
  std::vector<Placement> placements;  // ordered by rank; empty or one per rank
  std::optional<LinkFigures> host, rack, cluster;
  std::vector<WanLink> wan;  // both directions of every pair, ordered by (from, to)

  const WanLink* wan_link(const std::string& from, const std::string& to) const;
  // Regions named by placements, in order of their lowest rank.
  std::vector<std::string> placement_regions() const;
};

// world_size < 0: unknown, the placements define it (ranks must then be 0..n-1).
TopologyFile parse_topology(const std::string& text, const std::string& source, int world_size = -1);
TopologyFile load_topology_file(const std::string& path, int world_size = -1);

// Checks the WAN matrix against the regions the ranks actually sit in: with placements this
// already ran at parse time, without them it can only run once the localities are known.
void check_wan_regions(const TopologyFile& file, const std::vector<Locality>& localities);

// The localities to plan with: the file's placements when it has them (local_rank
// recomputed), otherwise `from_env` unchanged. Checks the WAN matrix either way.
std::vector<Locality> apply_placements(const TopologyFile& file, std::vector<Locality> from_env);

}  // namespace strata::topology
