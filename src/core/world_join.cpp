#include "core/world_join.hpp"

#include <unistd.h>

#include <cctype>
#include <mutex>

#include "core/config.hpp"
#include "base/log.hpp"
#include "bootstrap.pb.h"
#include "bootstrap/gather.hpp"
#include "core/launch_env.hpp"
#include "core/link_settings.hpp"
#include "strata/errors.hpp"
#include "transport/factory.hpp"
#include "wan/routed_transport.hpp"
#include "wan/wan_transport.hpp"

namespace strata::detail {

namespace {

std::string record_key(const WorldShape& w, int t) {
  return t < w.workers ? "rank/" + std::to_string(t) : "server/" + std::to_string(t - w.workers);
}

}  // namespace

std::string absent(const std::string& msg, const std::string& kind) {
  std::string out;
  for (std::size_t pos = msg.find(kind); pos != std::string::npos; pos = msg.find(kind, pos + 1)) {
    std::size_t end = pos + kind.size();
    while (end < msg.size() && std::isdigit(static_cast<unsigned char>(msg[end]))) ++end;
    out += (out.empty() ? "" : ", ") + msg.substr(pos + kind.size(), end - pos - kind.size());
  }
  return out;
}

TransportKind resolve_transport(TransportKind k) {
  if (k != TransportKind::automatic) return k;
  return config::get(config::transport) == "tcp" ? TransportKind::tcp : TransportKind::ucx;
}

std::chrono::milliseconds resolve_timeout(std::chrono::milliseconds t) {
  if (t.count() > 0) return t;
  const double s = config::get(config::timeout_s);
  return std::chrono::milliseconds(static_cast<long long>(s * 1000));
}

int configured_servers() {
  return static_cast<int>(config::get(config::servers));
}

Joined exchange_localities(bootstrap::Store& store, const WorldShape& w, transport::Clock::time_point deadline,
                           std::chrono::milliseconds timeout, const Published& published) {
  const Locality mine = detail::local_locality();
  bootstrap::wire::RankRecord rec;
  rec.set_rank(w.me);
  rec.set_host(mine.host);
  rec.set_region(mine.region);
  rec.set_cluster(mine.cluster);
  rec.set_rack(mine.rack);
  rec.set_pid(static_cast<int>(::getpid()));
  rec.set_refused(published.settings.refused);
  rec.set_settings(published.settings.shared);
  rec.set_lineage(published.lineage);
  rec.set_liveness(published.liveness);
  std::vector<std::string> records;
  try {
    if (w.servers == 0) {
      records = bootstrap::allgather(store, "rank", w.me, w.size(), rec.SerializeAsString(), deadline);
    } else {
      store.set(record_key(w, w.me), rec.SerializeAsString());
      std::vector<std::string> keys;
      for (int t = 0; t < w.size(); ++t) keys.push_back(record_key(w, t));
      records = store.get(keys, deadline);
    }
  } catch (const TimeoutError& e) {
    const std::string who = w.is_server() ? "server " + std::to_string(w.me - w.workers) : "rank " + std::to_string(w.me);
    const std::string ranks = absent(e.what(), "rank/"), servers = absent(e.what(), "server/");
    std::string missing;
    if (!ranks.empty()) missing = "rank(s) " + ranks + " of " + std::to_string(w.workers);
    if (!servers.empty())
      missing += (missing.empty() ? "" : " and ") + std::string("server(s) ") + servers + " of " + std::to_string(w.servers);
    throw TimeoutError("communicator creation on " + who + ": " + missing + " did not join within " +
                       std::to_string(timeout.count() / 1000.0) + " s (STRATA_TIMEOUT_S)");
  }
  Joined joined;
  auto& out = joined.localities;
  out.resize(static_cast<std::size_t>(w.size()));
  joined.settings.resize(out.size());
  joined.livenesses.resize(out.size());
  for (int t = 0; t < w.size(); ++t) {
    bootstrap::wire::RankRecord other;
    if (!other.ParseFromString(records[static_cast<std::size_t>(t)]))
      throw TransportError("communicator creation: the record of transport rank " + std::to_string(t) +
                           " in the rendezvous store is malformed (another program or strata version "
                           "using the same store?)");
    auto& l = out[static_cast<std::size_t>(t)];
    l.host = other.host();
    l.region = other.region();
    l.cluster = other.cluster();
    l.rack = other.rack();
    joined.settings[static_cast<std::size_t>(t)] = {other.refused(), other.settings()};
    joined.livenesses[static_cast<std::size_t>(t)] = other.liveness();
    if (t == 0) joined.lineage = other.lineage();
    for (int q = 0; q < t; ++q)
      if (out[static_cast<std::size_t>(q)].host == l.host) ++l.local_rank;
  }
  return joined;
}

std::unique_ptr<transport::Transport> connect_world(bootstrap::Store& store, TransportKind kind,
                                                    const WorldShape& w,
                                                    const std::vector<Locality>& localities,
                                                    transport::Clock::time_point deadline,
                                                    const bootstrap::JobSecret& secret,
                                                    const transport::FabricSettings& fabric) {
  auto t = transport::make_transport(kind, w.me, w.size(), store, deadline, secret, fabric);
  // Peers in other regions are reached over the striped WAN link. Every process decides
  // alike: if any two processes differ in region, each has some peer elsewhere.
  std::vector<bool> remote(static_cast<std::size_t>(w.size()));
  bool any_remote = false;
  for (int r = 0; r < w.size(); ++r) {
    remote[static_cast<std::size_t>(r)] = localities[static_cast<std::size_t>(r)].region !=
                                          localities[static_cast<std::size_t>(w.me)].region;
    any_remote = any_remote || remote[static_cast<std::size_t>(r)];
  }
  if (any_remote && config::get(config::wan_link) != 0) {
    auto options = wan_options();
    options.secret = secret;
    if (!options.tls.on && w.me == 0)
      log::warn("cross-region traffic goes over the WAN link in clear text; STRATA_WAN_TLS=1 encrypts it");
    t = std::make_unique<wan::RoutedTransport>(std::move(t), wan::make_wan_transport(w.me, w.size(), store, deadline, options),
                                               std::move(remote));
  }
  // Nobody may leave (and rank 0 may not stop the store) before everyone is connected.
  bootstrap::allgather(store, "ready", w.me, w.size(), "1", deadline);
  return t;
}

bootstrap::JobSecret resolve_secret(bootstrap::Store& store, int rank, bool shared_store,
                                    transport::Clock::time_point deadline) {
  if (auto configured = detail::configured_secret()) return *configured;
  if (shared_store) {
    if (rank == 0) store.set("job-secret", bootstrap::JobSecret::random().hex());
    const auto drawn = bootstrap::JobSecret::from_hex(store.get("job-secret", deadline));
    if (!drawn) throw TransportError("communicator creation: the job's secret in the store is malformed");
    return *drawn;
  }
  static std::once_flag warned;
  if (rank == 0)
    std::call_once(warned, [] {
      log::warn("this job has no secret (STRATA_JOB_SECRET, STRATA_JOB_SECRET_FILE, or a UniqueId): any process "
                "that reaches its ports can join it or read its rendezvous store");
    });
  return {};
}

}  // namespace strata::detail
