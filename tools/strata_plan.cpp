// strata-plan: what the cost model predicts and which algorithm the selector picks, per
// level and message size, with the reason.
//
//   strata-plan --regions 4 --hosts 1024 --ranks-per-host 8     # a synthetic layout, no processes
//   strata-plan --file bench/topologies/two-regions.textproto   # a topology file's layout and figures
//   strata-plan --ranks 4 --transport tcp                       # live: 4 local ranks probe their links
//   strata-plan --ranks 4 --transport tcp --measured a.json b.json   # against strata-perf --algo all runs
//
// Live mode starts ranks like strata-perf (or joins a job strata-run, torchrun or mpirun
// launched); every rank creates a communicator, so the figures are the probed ones the
// library itself uses. Rank 0 prints.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "collectives/registry.hpp"
#include "core/comm_impl.hpp"
#include "core/launch_env.hpp"
#include "hierarchy/plan.hpp"
#include "hierarchy/plan_cost.hpp"
#include "launcher.hpp"
#include "perf_report.hpp"
#include "plan_format.hpp"
#include "plan_measured.hpp"
#include "probe/probe.hpp"
#include "quant/codec.hpp"
#include "strata/errors.hpp"
#include "topology/levels.hpp"
#include "topology/selector.hpp"
#include "topology/topology_file.hpp"
#include "topology/tuner.hpp"

namespace {

using namespace strata;
namespace topo = strata::topology;
using collectives::AlgorithmId;
using namespace strata::plan_tool;

constexpr const char* kSpawnedMarker = "STRATA_PLAN_SPAWNED";

struct Options {
  std::string file;
  int regions = 0, hosts = 0, per_host = 0;  // synthetic layout
  std::optional<int> ranks;                  // live: spawn this many local ranks
  bool live = false;                         // live: join a job launched elsewhere
  std::string transport;
  std::string collectives = "allreduce";
  std::uint64_t min_bytes = 8, max_bytes = 1ull << 30, factor = 8;
  std::vector<std::string> measured;  // strata-perf --json files
  bool markdown = false;
  std::string compress;  // a codec spec: price the compressed allreduce too
  bool learn = true;  // live: run each size until the online tuner settles, print what it learned
};

// Sizes above this are left out of the live tuning run: a few dozen calls each.
constexpr std::uint64_t kLearnMaxBytes = 64ull << 20;

// ---- formatting -------------------------------------------------------------------

void print_figures(const topo::Figures& f, const probe::ProbeReport* report) {
  if (report) {
    const char* how = report->how == probe::ProbeReport::How::probed   ? "probed"
                      : report->how == probe::ProbeReport::How::cached ? "from the probe cache"
                      : report->how == probe::ProbeReport::How::inherited ? "from the communicator it was made from"
                                                                     : "not probed";
    std::printf("link figures: %s%s%s (%.1f ms at creation, budget %.0f ms)\n", how, report->why.empty() ? "" : ": ",
                report->why.c_str(), report->seconds * 1e3, report->budget_s * 1e3);
    for (const auto& p : report->measured.pairs)
      std::printf("  pair %-3s rank %d <-> %d: %d small, %d large round trips%s%s\n", topo::to_string(p.pair.cls),
                  p.pair.from, p.pair.to, p.small_iters, p.large_iters,
                  p.beta_measured ? "" : " (no time for a larger message: beta kept)",
                  p.gap_measured ? "" : " (no time for a burst: gap kept)");
  } else {
    std::printf("link figures: built-in table%s (no processes, nothing probed)\n", f.regions.empty() ? "" : " and file");
  }
  for (int c = 0; c < topo::kLinkClasses; ++c) {
    const auto& l = f.link[c];
    std::printf("  %-4s alpha %10s   beta %8.4f ns/B (%8.3f GB/s)   gap %10s   %s\n",
                topo::to_string(static_cast<topo::LinkClass>(c)), seconds(l.cost.alpha).c_str(), l.cost.beta * 1e9,
                l.cost.beta > 0 ? 1e-9 / l.cost.beta : 0.0, seconds(l.cost.gap).c_str(), topo::to_string(l.source));
  }
  std::printf("  gamma %.4f ns/B (%.2f GB/s reduced)   %s\n", f.gamma * 1e9, f.gamma > 0 ? 1e-9 / f.gamma : 0.0,
              topo::to_string(f.gamma_source));
  if (f.wait_alpha > 0)
    std::printf("  every round + %s: waits alternate between the two fabrics (ranks span regions)\n",
                seconds(f.wait_alpha).c_str());
  const std::size_t n = f.regions.size();
  if (n > 1 && f.wan.size() == n * n) {
    std::printf("  wan matrix (one-way alpha, round trip / GB/s / loss):\n");
    for (std::size_t a = 0; a < n; ++a)
      for (std::size_t b = 0; b < n; ++b)
        if (a != b) {
          const auto& c = f.wan[a * n + b].cost;
          std::printf("    %-12s -> %-12s %10s %10s %8.3f %6.2f%%   %s\n", f.regions[a].c_str(), f.regions[b].c_str(),
                      seconds(c.alpha).c_str(), seconds(c.alpha + f.wan[b * n + a].cost.alpha).c_str(), 1e-9 / c.beta,
                      100 * c.loss, topo::to_string(f.wan[a * n + b].source));
        }
  }
}

std::vector<CollectiveKind> kinds_of(const std::string& arg) {
  if (arg == "all")
    return {CollectiveKind::allreduce, CollectiveKind::reduce_scatter, CollectiveKind::allgather,
            CollectiveKind::broadcast, CollectiveKind::reduce};
  std::vector<CollectiveKind> out;
  std::stringstream in(arg);
  for (std::string w; std::getline(in, w, ',');) {
    const auto k = topo::parse_collective_name(w);
    if (!k) throw InvalidArgument("-t: '" + w + "' is not a collective");
    out.push_back(*k);
  }
  return out;
}

// One group shape: every algorithm's prediction per size, the pick, and why.
void print_level(const topo::Selector& sel, const collectives::Group& g, const std::string& title,
                 const std::vector<CollectiveKind>& kinds, const std::vector<std::uint64_t>& sizes) {
  const int p = g.size();
  const topo::GroupCost cost = sel.group_cost(g);
  std::printf("\n%s: %d ranks over %s links (alpha %s, %.3f GB/s)\n", title.c_str(), p,
              topo::to_string(sel.group_class(g)), seconds(cost.link.alpha).c_str(), 1e-9 / cost.link.beta);
  for (const auto kind : kinds) {
    std::vector<AlgorithmId> algos;
    for (const auto& a : collectives::algorithms())
      if (topo::predict(a.id, kind, p, 1, cost)) algos.push_back(a.id);
    std::printf("  %s\n  %10s", to_string(kind), "size");
    for (auto a : algos) std::printf(" %18s", collectives::algorithm(a).name);
    std::printf("  %-18s %s\n", "pick", "why");
    for (const std::uint64_t b : sizes) {
      std::printf("  %10s", bytes_str(b).c_str());
      for (auto a : algos)
        std::printf(" %18s", seconds(topo::predict(a, kind, p, static_cast<double>(b), cost)->total()).c_str());
      const auto& pick = sel.choose(kind, DataType::f32, count_of(kind, b, p), g);
      const auto& table = topo::build_score_table(kind, sel.group_class(g), p, cost);
      std::printf("  %-18s %s\n", pick.name, topo::explain(table.at(b)).c_str());
    }
    // The table in words, split where the winner or what bounds it changes:
    // "recursive_doubling up to 16 KiB (α-bound); direct up to 64 KiB (α-bound); direct above 64 KiB (β-bound)".
    const auto table = topo::build_score_table(kind, sel.group_class(g), p, cost);
    struct Span {
      AlgorithmId winner;
      std::string bound;
      int first, last;
    };
    std::vector<Span> spans;
    for (int b = 0; b < topo::ScoreTable::kBuckets; ++b) {
      const auto& top = table.ranked[static_cast<std::size_t>(b)].front();
      if (!spans.empty() && spans.back().winner == top.algorithm && spans.back().bound == top.cost.bound())
        spans.back().last = b;
      else
        spans.push_back(Span{top.algorithm, top.cost.bound(), b, b});
    }
    std::string summary;
    for (const auto& sp : spans) {
      const bool from_zero = sp.first == 0, to_inf = sp.last + 1 == topo::ScoreTable::kBuckets;
      const std::string lo = from_zero ? "" : bytes_str(topo::ScoreTable::bucket_top(sp.first - 1));
      const std::string hi = bytes_str(topo::ScoreTable::bucket_top(sp.last));
      summary += std::string(summary.empty() ? "" : "; ") + collectives::algorithm(sp.winner).name + " " +
                 (from_zero && to_inf ? std::string("at every size")
                  : from_zero         ? "up to " + hi
                  : to_inf            ? "above " + lo
                                      : lo + " < size <= " + hi) +
                 " (" + sp.bound + ")";
    }
    std::printf("  by the model: %s\n", summary.c_str());
  }
}

// Hierarchical plan against the best flat algorithm over the whole world.
void print_plan_vs_flat(const topo::Selector& sel, const hierarchy::Plan& plan, const collectives::Group& world,
                        const std::vector<CollectiveKind>& kinds, const std::vector<std::uint64_t>& sizes) {
  const bool split = plan.kind == hierarchy::Plan::Kind::split_rail;
  std::printf("\n%s plan against the best flat algorithm over all %d ranks (predicted)\n",
              split ? "split-rail" : "leader", world.size());
  for (const auto kind : kinds) {
    if (kind == CollectiveKind::reduce) continue;  // plans leave reduce flat
    std::printf("  %s\n  %10s %12s %12s  %-18s %s\n", to_string(kind), "size", "plan", "flat", "flat best", "plan speedup");
    const auto wc = sel.group_cost(world);
    for (const std::uint64_t b : sizes) {
      const double n = static_cast<double>(b);
      const topo::Cost h = hierarchy::predict_plan(sel, plan, kind, n);
      const topo::Best f = topo::best_flat(kind, world.size(), n, wc);
      std::printf("  %10s %12s %12s  %-18s %.2fx\n", bytes_str(b).c_str(), seconds(h.total()).c_str(),
                  seconds(f.cost.total()).c_str(), collectives::algorithm(f.algorithm).name,
                  h.total() > 0 ? f.cost.total() / h.total() : 1.0);
    }
  }
}

// A lossy allreduce on the plan against the exact one: the codec's two exchanges across
// regions, the one the selector picks, and what a top-level rank sends over the WAN.
void print_compressed(const topo::Selector& sel, const hierarchy::Plan& plan, const std::string& spec,
                      const std::vector<std::uint64_t>& sizes) {
  using E = collectives::EncodedExchange;
  const auto codec = quant::make_codec(spec);
  const int p = plan.levels.back().groups.empty() ? 1 : static_cast<int>(plan.levels.back().groups.front().size());
  std::printf("\ncompressed allreduce (%s) on the %s plan, predicted; the top level's %d members exchange "
              "encodings by gather (one round, %d encodings out per member) or reduce_scatter (two rounds, "
              "%.2f encodings)\n",
              quant::to_string(codec->spec()).c_str(), plan.kind == hierarchy::Plan::Kind::split_rail ? "split-rail" : "leader",
              p, std::max(p - 1, 0), p > 1 ? 2.0 * (p - 1) / p : 0.0);
  std::printf("  %10s %12s %12s %14s  %-14s %8s  %12s %12s %14s\n", "size", "exact", "gather", "reduce_scatter", "pick",
              "speedup", "WAN B exact", "gather", "reduce_scatter");
  for (const std::uint64_t b : sizes) {
    const double n = static_cast<double>(b);
    const topo::Cost exact = hierarchy::predict_plan(sel, plan, CollectiveKind::allreduce, n);
    const auto pick = hierarchy::predict_compressed_plan(sel, plan, *codec, n);
    const auto g = hierarchy::predict_compressed_plan(sel, plan, *codec, n, E::gather);
    const auto r = hierarchy::predict_compressed_plan(sel, plan, *codec, n, E::reduce_scatter);
    std::printf("  %10s %12s %12s %14s  %-14s %7.1fx  %12.0f %12.0f %14.0f\n", bytes_str(b).c_str(),
                seconds(exact.total()).c_str(), seconds(g.cost.total()).c_str(), seconds(r.cost.total()).c_str(),
                collectives::to_string(pick.exchange), pick.cost.total() > 0 ? exact.total() / pick.cost.total() : 1.0,
                pick.exact_wan_bytes, g.wan_bytes, r.wan_bytes);
  }
  std::printf("  (STRATA_COMPRESSED_EXCHANGE=gather or reduce_scatter overrides the pick; WAN bytes: per top-level "
              "member per call, encodings as the codec expects them)\n");
}

// Why the top level crosses regions in the order it does: its slowest hop against the
// slowest hop of the order the regions' lowest ranks give.
void print_region_ring(const topo::Figures& f, const hierarchy::Plan& plan) {
  if (!plan.region_ring || plan.region_ring->order.size() < 3) return;
  const auto& best = *plan.region_ring;
  auto natural = best.order;
  std::sort(natural.begin(), natural.end(), [&](const std::string& a, const std::string& b) {
    return std::find(f.regions.begin(), f.regions.end(), a) < std::find(f.regions.begin(), f.regions.end(), b);
  });
  const auto by_rank = topo::ring_in_order(f, natural);
  std::printf("region ring: %s\n", topo::describe(best, f).c_str());
  if (by_rank.order == best.order) {
    std::printf("  the regions' rank order is already the best ring%s\n",
                f.wan.empty() ? " (no WAN matrix: every order costs the same)" : "");
  } else {
    std::printf("  instead of rank order %s\n", topo::describe(by_rank, f).c_str());
    std::printf("  judged by the slowest hop's bandwidth, then its latency, then the sum of latencies:"
                " %.2fx the bandwidth of rank order\n",
                best.worst.beta > 0 ? by_rank.worst.beta / best.worst.beta : 1.0);
  }
}

// ---- modes --------------------------------------------------------------------------

// world: the group flat collectives run over (a live communicator's says whether its
// ranks share memory; a synthetic layout's never does).
void print_plan(const topo::Selector& sel, const collectives::Group& world, const std::optional<hierarchy::Plan>& plan,
                const Options& o) {
  const auto kinds = kinds_of(o.collectives);
  const auto sizes = perf::sweep_sizes(o.min_bytes, o.max_bytes, 0, o.factor);
  if (!sel.rules().empty()) {
    std::printf("STRATA_ALGO rules come first:");
    for (const auto& r : sel.rules().rules) std::printf(" [%s]", r.text.c_str());
    std::printf("\n");
  }
  if (plan) {
    std::printf("plan: %s (rank 0's groups)\n", plan->describe().c_str());
    print_region_ring(sel.figures(), *plan);
    for (std::size_t i = 0; i < plan->mine.size(); ++i)
      if (!plan->mine[i].ranks.empty())
        print_level(sel, plan->mine[i], std::string("level ") + topo::to_string(plan->levels[i].level), kinds, sizes);
  }
  print_level(sel, world, plan ? "flat (reduce and barrier, or STRATA_ALGO=flat)" : "flat", kinds, sizes);
  if (plan) print_plan_vs_flat(sel, *plan, world, kinds, sizes);
  if (!o.compress.empty()) {
    if (plan)
      print_compressed(sel, *plan, o.compress, sizes);
    else
      std::printf("\ncompressed allreduce: every rank in one region, so it runs exact (compression applies across "
                  "regions)\n");
  }
  if (!o.measured.empty()) print_measured(sel, world, o.measured, o.markdown, plan);
}

int run_offline(const Options& o) {
  std::vector<Locality> ls;
  if (o.regions > 0) ls = topo::synthesize_uniform(o.regions, o.hosts, o.per_host);
  std::optional<topo::TopologyFile> file;
  if (!o.file.empty()) {
    file = topo::load_topology_file(o.file, ls.empty() ? -1 : static_cast<int>(ls.size()));
    if (ls.empty()) ls.resize(file->placements.size());
    ls = topo::apply_placements(*file, std::move(ls));
  }
  if (ls.empty()) throw InvalidArgument("the layout has no ranks: give --regions/--hosts/--ranks-per-host or a file with placements");
  topo::Figures f = topo::default_figures();
  f.chunk_bytes = static_cast<std::size_t>(config::get(config::chunk_bytes));
  f.small_bytes = static_cast<std::size_t>(config::get(config::small_bytes));
  topo::set_regions(f, topo::region_order(ls));
  if (file) topo::apply_file(f, *file);
  const auto spec = config::get(config::algo);
  topo::Selector sel(f, ls, topo::parse_algorithm_rules(spec, "STRATA_ALGO", true));
  auto plan = hierarchy::make_plan(ls, 0, hierarchy::parse_choice(spec));
  if (plan) hierarchy::order_regions(*plan, ls, f);
  std::printf("strata-plan: %zu ranks in %zu region(s)\n", ls.size(), f.regions.size());
  print_figures(f, nullptr);
  print_plan(sel, collectives::Group::world(0, static_cast<int>(ls.size())), plan, o);
  return 0;
}

// Every size of the sweep (up to kLearnMaxBytes), called as often as the online tuner
// needs to settle it, then what the tuner kept against the model's pick.
void learn_online(detail::CommImpl& comm, const Options& o) {
  const int p = comm.size();
  topology::Tuner::Options tuning;
  tuning.samples = static_cast<int>(config::get(config::tune_samples));
  const int per_candidate = topology::Tuner::calls_per_candidate(tuning);
  int most = 0;
  if (config::get(config::tune) == 0) {
    if (comm.rank() == 0) std::printf("\nonline tuning: off (STRATA_TUNE=0)\n");
    return;
  }
  std::vector<float> send, recv;
  for (const auto kind : kinds_of(o.collectives))
    for (const auto bytes : perf::sweep_sizes(o.min_bytes, std::min(o.max_bytes, kLearnMaxBytes), 0, o.factor)) {
      const std::size_t count = count_of(kind, bytes, p);
      send.assign(count * static_cast<std::size_t>(p), 1.0f);
      recv.assign(count * static_cast<std::size_t>(p), 0.0f);
      collectives::CollArgs a;
      a.kind = kind;
      a.send = send.data();
      a.recv = recv.data();
      a.count = count;
      a.dtype = DataType::f32;
      // Enough calls for the tuner to try every algorithm that could be a candidate
      // (ties have no cap), and one more that runs what it kept.
      int candidates = 0;
      for (const auto& alg : collectives::algorithms())
        candidates += alg.supports(kind, DataType::f32, count, comm.world().shape()) ? 1 : 0;
      const int calls = candidates * per_candidate + 1;
      most = std::max(most, calls);
      for (int i = 0; i < calls; ++i) comm.collective(a, CallOptions{}).wait();
    }
  const std::string report = comm.tuning_report();
  if (comm.rank() != 0) return;
  std::printf("\nlearned online (STRATA_TUNE): up to %d calls per size up to %s, each candidate's mean "
              "over its faster half of calls, each call from its last rank's start to its last rank's end\n%s",
              most, bytes_str(std::min(o.max_bytes, kLearnMaxBytes)).c_str(),
              report.empty() ? "  nothing to choose: the model left one candidate at every size\n" : report.c_str());
  if (o.max_bytes > kLearnMaxBytes) std::printf("  (sizes above %s not run)\n", bytes_str(kLearnMaxBytes).c_str());
  std::fflush(stdout);
}

int run_rank(const Options& o) {
  const auto info = detail::discover_launch();
  detail::CommImpl::Setup s;
  s.rank = info.rank;
  s.size = info.size;
  s.root = info.root;
  s.key_prefix = "strata/";
  s.serve_root = true;
  if (o.transport == "tcp") s.options.transport = TransportKind::tcp;
  if (o.transport == "ucx") s.options.transport = TransportKind::ucx;
  detail::CommImpl comm(s);
  if (comm.rank() == 0) {
    std::printf("strata-plan: live communicator of %d ranks over %s\n", comm.size(), to_string(comm.transport_kind()));
    print_figures(comm.selector().figures(), &comm.probe_report());
    print_plan(comm.selector(), comm.world(), comm.plan(), o);
    std::fflush(stdout);
  }
  if (o.learn) learn_online(comm, o);
  if (comm.rank() == 0) {
    // What the link measured while the tuning run used it: the round trip and loss the
    // figures above should agree with (a topology file may give the loss; probing does not).
    const auto p = comm.wan_path();
    if (p.rtt_s > 0)
      std::printf("\nwan path as rank 0's link measured it: round trip %.2f ms (smoothed %.2f ms), delivery rate "
                  "%.1f Mbit/s over %d stream(s), %.3f%% of segments retransmitted\n",
                  p.rtt_s * 1e3, p.srtt_s * 1e3, p.rate_bytes_per_s * 8 / 1e6, p.streams, p.loss * 100);
  }
  // Everyone stays until rank 0 has printed, so no rank sees its peers vanish early.
  comm.collective(collectives::CollArgs{CollectiveKind::barrier}, CallOptions{}).wait();
  return 0;
}

int spawn(const Options& o, int argc, char** argv) {
  tools::LaunchSpec spec;
  spec.nranks = *o.ranks;
  spec.argv.push_back(tools::self_executable());
  for (int i = 1; i < argc; ++i) spec.argv.emplace_back(argv[i]);
  spec.all_stdout = false;
  spec.name = "strata-plan";
  const int n = *o.ranks, regions = std::max(1, o.regions);
  spec.extra_env = [n, regions](int rank) {
    tools::EnvList env{{kSpawnedMarker, "1"}};
    if (regions > 1) {
      const int per = std::max(1, (n + regions - 1) / regions);
      const std::string region = "region" + std::to_string(std::min(rank / per, regions - 1));
      env.push_back({"STRATA_REGION", region});
      env.push_back({"STRATA_HOST", region + "-host"});
    }
    return env;
  };
  return tools::launch(spec);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Prints what strata's cost model predicts for every algorithm, per level of the plan and message "
      "size, which one the selector picks and why. Offline from a synthetic layout or a topology file "
      "(built-in and file figures), or live from local ranks that probe their links as a communicator does.",
      "strata-plan"};
  Options o;
  std::string minb = "8", maxb = "1G";
  app.add_option("--file", o.file, "Topology file (protobuf text format): placements and link figures")
      ->check(CLI::ExistingFile);
  auto* r_opt = app.add_option("--regions", o.regions, "Regions: of the synthetic layout, or of the live ranks")
                    ->check(CLI::Range(1, 4096));
  auto* h_opt = app.add_option("--hosts", o.hosts, "Hosts per synthetic region")->check(CLI::Range(1, 1 << 16));
  auto* k_opt =
      app.add_option("--ranks-per-host", o.per_host, "Ranks per synthetic host")->check(CLI::Range(1, 1024));
  h_opt->needs(r_opt, k_opt);
  k_opt->needs(r_opt, h_opt);
  app.add_option("--ranks", o.ranks, "Live: start this many local ranks, each creating a communicator")
      ->check(CLI::Range(1, 4096));
  app.add_flag("--live", o.live, "Live: join a job launched by strata-run, torchrun, mpirun or srun");
  app.add_option("--transport", o.transport, "Live: ucx or tcp (default: STRATA_TRANSPORT)")
      ->check(CLI::IsMember({"ucx", "tcp"}));
  app.add_option("-t,--collective", o.collectives, "allreduce, reduce_scatter, allgather, broadcast, reduce "
                                                   "(comma-separated) or all")
      ->capture_default_str();
  app.add_option("-b,--minbytes", minb, "Smallest size (K/M/G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", maxb, "Largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", o.factor, "Size multiplier")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  app.add_option("--measured", o.measured, "strata-perf --json files (e.g. from --algo all) to set against the "
                                           "predictions; medians over the files")
      ->check(CLI::ExistingFile);
  app.add_flag("--markdown", o.markdown, "Measured tables as Markdown");
  app.add_option("--compress", o.compress, "A codec (e.g. topk:0.01+int8): also price the compressed allreduce on the "
                                           "plan, by each exchange across regions, against the exact one");
  app.add_flag("!--no-learn", o.learn, "Live: skip the tuning run (by default each size up to 64 MiB runs until the "
                                       "online tuner settles, and what it learned is printed)");
  try {
    app.parse(argc, argv);
    const auto lo = perf::parse_size(minb), hi = perf::parse_size(maxb);
    if (!lo || !hi || *lo == 0 || *lo > *hi) throw CLI::ValidationError("--minbytes", "need 0 < minbytes <= maxbytes");
    o.min_bytes = *lo;
    o.max_bytes = *hi;
    if (!o.compress.empty()) {
      try {
        if (!quant::make_codec(o.compress)->lossy()) throw InvalidArgument("'" + o.compress + "' is not lossy");
      } catch (const InvalidArgument& e) {
        throw CLI::ValidationError("--compress", e.what());
      }
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const bool spawned = std::getenv(kSpawnedMarker) != nullptr;
  const bool synthetic = o.hosts > 0;
  if (!spawned && !o.ranks && !o.live && !synthetic && o.file.empty()) {
    std::fprintf(stderr, "strata-plan: give --regions/--hosts/--ranks-per-host, --file, --ranks N or --live\n");
    return 2;
  }
  try {
    if (spawned || o.live) return run_rank(o);
    if (o.ranks) return spawn(o, argc, argv);
    return run_offline(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-plan: %s\n", e.what());
    return 1;
  }
}
