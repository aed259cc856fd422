// strata-topo: prints a topology — where each rank sits, the link figures, the WAN matrix —
// and the groups each rank would talk to at each level, as the hierarchical plans see them.
//
//   strata-topo --file bench/topologies/two-regions.textproto
//   strata-topo --regions 3 --hosts 2 --ranks-per-host 4          # what-if, no file
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "hierarchy/plan.hpp"
#include "strata/errors.hpp"
#include "topology/levels.hpp"
#include "topology/topology_file.hpp"

namespace topo = strata::topology;

namespace {

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

const char* or_dash(const std::string& s) { return s.empty() ? "-" : s.c_str(); }

void print_localities(const std::vector<strata::Locality>& ls) {
  std::printf("ranks (%zu)\n  %5s  %-14s %-10s %-10s %-20s %s\n", ls.size(), "rank", "region", "cluster",
              "rack", "host", "local");
  for (std::size_t r = 0; r < ls.size(); ++r) {
    const auto& l = ls[r];
    std::printf("  %5zu  %-14s %-10s %-10s %-20s %d\n", r, or_dash(l.region), or_dash(l.cluster),
                or_dash(l.rack), or_dash(l.host), l.local_rank);
  }
}

void print_links(const topo::TopologyFile& f) {
  std::printf("links\n");
  const std::pair<const char*, const std::optional<topo::LinkFigures>*> levels[] = {
      {"host", &f.host}, {"rack", &f.rack}, {"cluster", &f.cluster}};
  for (const auto& [name, fig] : levels) {
    if (fig->has_value())
      std::printf("  %-8s latency %8.2f us   bandwidth %8.2f Gbit/s\n", name, (*fig)->latency_us,
                  (*fig)->bandwidth_gbps);
    else
      std::printf("  %-8s (not given)\n", name);
  }
  if (f.wan.empty()) {
    std::printf("wan matrix: (not given)\n");
    return;
  }
  std::printf("wan matrix (one-way latency ms / bandwidth Mbit/s; * = mirrored from the other direction)\n");
  for (const auto& l : f.wan)
    std::printf("  %-14s -> %-14s %8.2f ms %10.1f Mbit/s%s\n", l.from_region.c_str(), l.to_region.c_str(),
                l.latency_ms, l.bandwidth_mbps, l.mirrored ? " *" : "");
}

void print_groups(const char* title, const std::vector<topo::LevelGroups>& levels, int world) {
  std::printf("%s\n", title);
  if (levels.empty()) {
    std::printf("  (no level has a group of more than one rank)\n");
    return;
  }
  for (const auto& lg : levels)
    std::printf("  %-8s %zu group(s): %s\n", topo::to_string(lg.level), lg.groups.size(),
                [&] {
                  std::string s;
                  for (const auto& g : lg.groups) s += (s.empty() ? "[" : " [") + join(g) + "]";
                  return s;
                }()
                    .c_str());
  for (int r = 0; r < world; ++r) {
    std::printf("  rank %d:", r);
    for (const auto& g : topo::groups_of(levels, r))
      std::printf("  %s[%s]@%d", topo::to_string(g.level), join(g.ranks).c_str(), g.me);
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Prints a strata topology: each rank's locality, the per-level link figures, the WAN "
      "matrix, and each rank's group at every level (split-rail groups when the layout is "
      "uniform, leader groups always). Reads a topology file (protobuf text, as "
      "STRATA_TOPO_FILE), or synthesizes a uniform layout for what-if printing.",
      "strata-topo"};
  std::string file;
  int world = -1, regions = 0, hosts = 0, per_host = 0;
  app.add_option("--file", file, "Topology file (protobuf text format)")->check(CLI::ExistingFile);
  app.add_option("--ranks", world, "World size the file's placements must cover")
      ->check(CLI::Range(1, 1 << 20));
  auto* r_opt =
      app.add_option("--regions", regions, "Synthesize this many regions")->check(CLI::Range(1, 4096));
  auto* h_opt =
      app.add_option("--hosts", hosts, "Hosts per synthesized region")->check(CLI::Range(1, 1 << 16));
  auto* k_opt =
      app.add_option("--ranks-per-host", per_host, "Ranks per synthesized host")->check(CLI::Range(1, 1024));
  r_opt->needs(h_opt, k_opt);
  h_opt->needs(r_opt, k_opt);
  k_opt->needs(r_opt, h_opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (file.empty() && regions == 0) {
    std::fprintf(stderr, "strata-topo: give --file, or --regions, --hosts and --ranks-per-host\n");
    return 2;
  }
  try {
    std::vector<strata::Locality> ls;
    if (regions > 0) ls = topo::synthesize_uniform(regions, hosts, per_host);
    if (world < 0 && !ls.empty()) world = static_cast<int>(ls.size());
    topo::TopologyFile f;
    if (!file.empty()) {
      f = topo::load_topology_file(file, world);
      if (!f.placements.empty() && ls.empty()) ls.resize(f.placements.size());
      if (!ls.empty()) ls = topo::apply_placements(f, std::move(ls));
    }
    if (ls.empty()) {
      print_links(f);
      std::printf("(the file places no ranks; add --regions, --hosts and --ranks-per-host to see groups)\n");
      return 0;
    }
    print_localities(ls);
    print_links(f);
    const auto layout = topo::derive_layout(ls);
    const int n = static_cast<int>(ls.size());
    if (layout.uniform)
      print_groups("split-rail groups (uniform layout), rank: level[members]@my index", layout.split_rail, n);
    else
      std::printf("layout is not uniform: %s\n", layout.irregularity.c_str());
    print_groups("leader groups, rank: level[members]@my index", layout.leader, n);
    const auto plan = strata::hierarchy::make_plan(ls, 0, strata::hierarchy::Choice::automatic);
    std::printf("plan with STRATA_ALGO=auto: %s\n",
                plan ? (plan->kind == strata::hierarchy::Plan::Kind::split_rail
                            ? "split rail (allreduce, reduce_scatter, allgather and broadcast by levels)"
                            : "leaders (data climbs to each unit's lowest rank; cluster leaders cross regions)")
                     : "flat (all ranks in one region)");
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "strata-topo: %s\n", e.what());
    return 1;
  }
  return 0;
}
