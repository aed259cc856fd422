// strata-peer-gloo: float-sum allreduce over Gloo's TCP transport, with the
// nccl-tests size-sweep flags and strata-perf's table and JSON (the
// strata_perf_report library), so that strata can be compared against it.
//
// Launch: N processes with STRATA_RANK / STRATA_WORLD_SIZE / STRATA_RUN_ID set
// (strata-run does that; bench/peers/compare.py spawns them itself).
// Rendezvous: gloo::rendezvous::FileStore in /tmp/strata-gloo-$STRATA_RUN_ID
// (this Gloo has no TCP store). Transport: gloo::transport::tcp on
// $STRATA_SOCKET_IFADDR, else 127.0.0.1 (ranks in separate network namespaces,
// as in bench/wan, each need an address the others can reach).
//
// For every size, every allreduce algorithm this Gloo offers is tried and the
// fastest is reported ("Gloo's best"), named in a comment after the row and in
// the JSON field "algo". In-place only: the out-of-place columns repeat the
// in-place figure (JSON: "out_of_place_mirrors_in_place": true).
//
// The algorithm variants and the per-size screening/timing are in
// gloo_algorithms.cpp; the flags and report shared with strata-peer-mpi in
// peer_common.cpp.

#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gloo_algorithms.hpp"
#include "peer_common.hpp"

namespace {

namespace perf = strata::perf;
namespace peers = strata::peers;
using peers::die;
using peers::gloo_peer::AlgoSpec;
using peers::gloo_peer::Bench;
using peers::gloo_peer::Options;
using peers::gloo_peer::Row;
using peers::gloo_peer::selected_algorithms;

void gloo_die(const std::string& msg) {
  std::fprintf(stderr, "strata-peer-gloo: %s\n", msg.c_str());
  std::exit(2);
}

void usage(const char* argv0) {
  std::printf("usage: %s [options]   (one process per rank; see bench/peers/README.md)\n%s", argv0,
              peers::sweep_usage("size and algorithm").c_str());
  std::fputs(
      "      --algos LIST         comma list of Gloo algorithms to try (default: all):\n"
      "                           ring,ring_chunked,halving_doubling,bcube,opts_ring,opts_bcube,\n"
      "                           ring/sync,ring_chunked/sync,halving_doubling/sync,bcube/sync\n"
      "      --no-sync            leave out the /sync variants (classic algorithms on\n"
      "                           pairs in synchronous mode, on their own connections)\n"
      "      --busy-poll          synchronous pairs spin on the socket (bad when oversubscribed)\n"
      "      --sync-max-bytes SIZE  largest size for the /sync variants (default 1M): a\n"
      "                           synchronous pair deadlocks once both ends block in write()\n"
      "      --no-screen          time every algorithm fully at every size\n"
      "      --screen-us US       screen (one op each) where the fastest op takes >= US (2000)\n"
      "      --screen-factor F    ... and fully time those within F x the fastest (3.0)\n"
      "      --store-dir DIR      FileStore directory (default /tmp/strata-gloo-$STRATA_RUN_ID)\n"
      "      --timeout SECONDS    Gloo operation timeout (default 600)\n"
      "Environment: STRATA_RANK, STRATA_WORLD_SIZE, STRATA_RUN_ID (set by strata-run);\n"
      "STRATA_SOCKET_IFADDR: address Gloo's TCP device binds (default 127.0.0.1).\n",
      stdout);
}

Options parse_args(int argc, char** argv) {
  Options o;
  enum { kAlgos = peers::kFirstExtraOption, kStore, kTimeout, kNoSync, kBusyPoll, kSyncMax, kNoScreen,
         kScreenUs, kScreenFactor };
  peers::ParseHooks hooks;
  hooks.extra_options = {
      {"algos", required_argument, nullptr, kAlgos},
      {"store-dir", required_argument, nullptr, kStore},
      {"timeout", required_argument, nullptr, kTimeout},
      {"no-sync", no_argument, nullptr, kNoSync},
      {"busy-poll", no_argument, nullptr, kBusyPoll},
      {"sync-max-bytes", required_argument, nullptr, kSyncMax},
      {"no-screen", no_argument, nullptr, kNoScreen},
      {"screen-us", required_argument, nullptr, kScreenUs},
      {"screen-factor", required_argument, nullptr, kScreenFactor}};
  hooks.on_extra = [&](int code, const char* arg) {
    switch (code) {
      case kAlgos: o.algos = arg; break;
      case kStore: o.store_dir = arg; break;
      case kTimeout: o.timeout_s = peers::parse_int(arg, "timeout"); break;
      case kNoSync: o.sync = false; break;
      case kBusyPoll: o.busy_poll = true; break;
      case kSyncMax: o.sync_max_bytes = peers::parse_size(arg); break;
      case kNoScreen: o.screen = false; break;
      case kScreenUs: o.screen_us = peers::parse_double(arg, "--screen-us"); break;
      case kScreenFactor:
        o.screen_factor = peers::parse_double(arg, "--screen-factor");
        if (!(o.screen_factor >= 1.0)) die("--screen-factor must be >= 1");
        break;
    }
  };
  hooks.validate = [&] {
    if (o.timeout_s < 1) die("--timeout must be >= 1");
  };
  hooks.on_help = [&] {
    usage(argv[0]);
    std::exit(0);
  };
  hooks.on_bad_command_line = [&] {
    usage(argv[0]);
    std::exit(2);
  };
  peers::parse_sweep_args(argc, argv, o, hooks);
  return o;
}

// perf::json_document plus Gloo's extras: per result "algo" (the fastest) and "algos"
// (every algorithm's outcome), and run-level keys.
std::string gloo_json(const perf::RunInfo& info, const std::vector<Row>& rows, const Options& o) {
  std::vector<perf::ResultRow> results;
  for (const auto& r : rows) results.push_back(r.result);
  perf::Json doc = perf::json_document(info, results);
  const auto opt = [](const std::optional<double>& v) { return v ? perf::json_number(*v) : perf::Json(nullptr); };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    perf::Json& j = doc["results"][i];
    j["algo"] = rows[i].algo;
    perf::Json algos = perf::Json::object();
    for (const auto& a : rows[i].algos)
      algos[a.name] = {{"status", a.status}, {"time", opt(a.time_us)}, {"screen_time", opt(a.screen_us)},
                       {"nwrong", a.nwrong ? perf::Json(*a.nwrong) : perf::Json(nullptr)}};
    j["algos"] = std::move(algos);
  }
  perf::Json first;
  first["gloo_version"] = std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
                          std::to_string(GLOO_VERSION_PATCH);
  first["out_of_place_mirrors_in_place"] = true;
  first["sync_max_bytes"] = o.sync_max_bytes;
  first["screen"] = o.screen;
  first["screen_us"] = o.screen_us;
  first["screen_factor"] = o.screen_factor;
  peers::add_run_keys(doc, o, first);
  return perf::dump_document(doc);
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) die(std::string(name) + " is not set (launch with strata-run or compare.py)");
  return peers::parse_int(v, name);
}

}  // namespace

int main(int argc, char** argv) {
  peers::set_die_handler(&gloo_die);
  Options o = parse_args(argc, argv);
  const int rank = env_int("STRATA_RANK");
  const int nranks = env_int("STRATA_WORLD_SIZE");
  if (nranks < 1 || rank < 0 || rank >= nranks) die("STRATA_RANK / STRATA_WORLD_SIZE out of range");

  std::string dir = o.store_dir;
  if (dir.empty()) {
    const char* run_id = std::getenv("STRATA_RUN_ID");
    if (!run_id || !*run_id) die("STRATA_RUN_ID is not set and no --store-dir given");
    dir = std::string("/tmp/strata-gloo-") + run_id;
  }

  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) die("cannot create " + dir + ": " + ec.message());

    // Gloo publishes the bound address through the store, so it must be one the
    // peers can reach, not a wildcard.
    const char* ifaddr = std::getenv("STRATA_SOCKET_IFADDR");
    const std::string bind_addr = ifaddr && *ifaddr ? ifaddr : "127.0.0.1";
    gloo::transport::tcp::attr attr;
    attr.hostname = bind_addr;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(dir);

    auto connect = [&](const std::string& prefix) {
      gloo::rendezvous::PrefixStore store("strata-peer-gloo/" + prefix, file_store);
      auto c = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
      c->setTimeout(std::chrono::seconds(o.timeout_s));
      c->connectFullMesh(store, dev);
      return c;
    };

    auto helper = connect("helper");
    const std::vector<AlgoSpec> algos = selected_algorithms(o.algos, nranks, o.sync);
    std::vector<std::shared_ptr<gloo::Context>> algo_ctx;
    for (const AlgoSpec& a : algos) {
      auto c = connect(a.name);
      if (a.sync) {
        // One way: a pair cannot go back to asynchronous mode.
        for (int peer = 0; peer < nranks; ++peer) {
          if (peer != rank) c->getPair(peer)->setSync(true, o.busy_poll);
        }
      }
      algo_ctx.push_back(c);
    }

    Bench bench(helper, algo_ctx, o);
    std::vector<double> pids(static_cast<std::size_t>(nranks), 0.0);
    pids[static_cast<std::size_t>(rank)] = static_cast<double>(::getpid());
    pids = bench.sum_vector(pids);
    // Everyone is connected (the sum above needed all ranks): the FileStore can go.
    if (rank == 0 && o.store_dir.empty()) std::filesystem::remove_all(dir, ec);

    if (rank == 0) {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
      std::vector<perf::RankLine> lines;
      for (int r = 0; r < nranks; ++r) {
        lines.push_back(perf::RankLine{r, static_cast<long>(pids[static_cast<std::size_t>(r)]), host, ""});
      }
      std::string names;
      for (const auto& a : algos) names += (names.empty() ? "" : ",") + a.name;
      std::string notes = "#  time: max over ranks of each rank's mean; in-place only, out-of-place repeats it\n";
      notes += "#  algorithms: " + names + "; the fastest per size follows each row\n";
      if (o.sync) notes += "#  /sync variants up to " + std::to_string(o.sync_max_bytes) + " bytes\n";
      if (o.screen) {
        char line[200];
        std::snprintf(line, sizeof line,
                      "#  screening: where one op of the fastest takes >= %.0f us, only algorithms "
                      "within %.2fx of it get the full timing\n",
                      o.screen_us, o.screen_factor);
        notes += line;
      }
      const std::string library = "gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
                                  std::to_string(GLOO_VERSION_MINOR) + "." +
                                  std::to_string(GLOO_VERSION_PATCH) + " transport tcp (" + bind_addr + ") ranks " +
                                  std::to_string(nranks);
      peers::print_header(o, library, lines, notes);
    }

    std::vector<Row> rows;
    peers::for_each_count(o, "size too large", [&](std::size_t count) {
      rows.push_back(bench.run_size(count, algos));
      if (rank == 0) peers::print_row(rows.back().result, rows.back().algo.c_str());
    });
    bench.barrier();

    std::vector<perf::ResultRow> results;
    for (const auto& r : rows) results.push_back(r.result);
    // The footer and exit status judge the reported (fastest correct) variants; a wrong
    // variant is named on its own line so it is not silently dropped.
    std::int64_t wrong = 0;
    for (const auto& r : rows) wrong += r.result.in_place.nwrong.value_or(0);
    if (rank == 0) {
      for (const auto& r : rows)
        for (const auto& a : r.algos)
          if (a.nwrong.value_or(0) != 0)
            std::printf("# gloo %s gave %lld wrong values at %llu bytes; left out of the choice\n", a.name.c_str(),
                        static_cast<long long>(*a.nwrong), static_cast<unsigned long long>(r.result.size));
      peers::print_footer(wrong, results);
      if (!o.json.empty()) {
        const perf::RunInfo info{"strata-peer-gloo", "all_reduce", nranks, "gloo-tcp", "float", "sum"};
        if (!peers::write_json(o.json, gloo_json(info, rows, o), "strata-peer-gloo")) return 1;
      }
    }
    return wrong ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-peer-gloo[rank %d]: %s\n", rank, e.what());
    return 3;
  }
}
