#include "core/settings_check.hpp"

#include <cmath>
#include <map>
#include <mutex>

#include "core/config.hpp"
#include "core/launch_env.hpp"
#include "base/log.hpp"
#include "core/world_join.hpp"
#include "strata/errors.hpp"

namespace strata::detail {

namespace {

// The settings that shape what ranks send each other, so that two ranks reading them
// differently would exchange messages that do not fit (chunk and segment cuts, the plan,
// the tuner's schedule of trials, the WAN link's streams and TLS) or misjudge each other
// (the heartbeat period a neighbour is held to).
const config::Id kShared[] = {
    config::Id::heartbeat_s,  config::Id::algo,          config::Id::chunk_bytes, config::Id::segment_bytes,
    config::Id::small_bytes,  config::Id::compress,      config::Id::tune,        config::Id::tune_samples,
    config::Id::probe,        config::Id::wan_link,      config::Id::wan_tls,     config::Id::wan_streams,
    config::Id::servers,      config::Id::compressed_exchange, config::Id::mesh_full_upto,
};

// Reads one setting through its typed getter; the refusal's text when it fails.
std::string refusal(const config::Setting& s, config::Id id) {
  try {
    switch (s.type) {
      case config::Type::integer: config::get(config::Key<config::Type::integer>{id}); break;
      case config::Type::real: config::get(config::Key<config::Type::real>{id}); break;
      case config::Type::string: config::get(config::Key<config::Type::string>{id}); break;
    }
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t nl = text.find('\n', at);
    out.push_back(text.substr(at, nl - at));
    at = nl == std::string::npos ? text.size() : nl + 1;
  }
  return out;
}

}  // namespace

std::optional<topology::TopologyFile> topology_file(const SettingsCheck& s, int world_size) {
  if (s.topo_file.empty()) return std::nullopt;
  return topology::load_topology_file(s.topo_file, world_size);
}

std::string SettingsCheck::refused_text() const {
  std::string s;
  for (const auto& r : refused) s += (s.empty() ? "" : "\n") + r;
  return s;
}

std::string SettingsCheck::shared_text() const {
  std::string s;
  for (const auto& [var, value] : shared) s += var + "=" + value + "\n";
  return s;
}

SettingsCheck check_settings(const CommOptions& opts) {
  log::set_level(log::level_named(config::get(config::debug)));
  // A misspelt or renamed variable is otherwise ignored in silence; once per process.
  static std::once_flag warned;
  std::call_once(warned, [] {
    for (const auto& line : config::unknown_variables()) log::warn(line);
  });
  SettingsCheck c;
  const auto& all = config::registry();
  std::map<config::Id, bool> bad;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto id = static_cast<config::Id>(i);
    if (auto why = refusal(all[i], id); !why.empty()) {
      c.refused.push_back(why);
      bad[id] = true;
    }
  }
  auto ok = [&](config::Id id) { return !bad.count(id); };

  if (ok(config::Id::heartbeat_s)) {
    const double hb = config::get(config::heartbeat_s);
    // Beats go out a quarter period apart and a neighbour is lost after a period of
    // silence: below a second, one busy moment of a host's scheduler is a death.
    if (hb > 0 && hb < 1)
      c.refused.push_back("STRATA_HEARTBEAT_S=" + config::text(config::heartbeat_s) +
                          " is too short: 0 (no heartbeats) or at least 1 s");
    else
      c.heartbeat = std::chrono::milliseconds(static_cast<long long>(hb * 1000));
  }
  if (ok(config::Id::compress)) {
    try {
      c.compression = Compression::parse(config::get(config::compress));
    } catch (const InvalidArgument& e) {
      c.refused.push_back(std::string("STRATA_COMPRESS: ") + e.what());
    }
  }
  if (ok(config::Id::keepalive_s))
    c.keepalive = std::chrono::milliseconds(static_cast<long long>(config::get(config::keepalive_s) * 1000));
  if (ok(config::Id::transport)) c.transport = resolve_transport(opts.transport);
  if (ok(config::Id::timeout_s)) c.timeout = resolve_timeout(opts.timeout);
  if (ok(config::Id::chunk_bytes)) c.chunk_bytes = static_cast<std::size_t>(config::get(config::chunk_bytes));
  if (ok(config::Id::small_bytes)) c.small_bytes = static_cast<std::size_t>(config::get(config::small_bytes));
  if (ok(config::Id::segment_bytes)) c.segment_bytes = static_cast<std::size_t>(config::get(config::segment_bytes));
  if (ok(config::Id::probe)) c.probe = config::get(config::probe) != 0;
  if (ok(config::Id::probe_cache_s)) c.probe_cache_s = static_cast<double>(config::get(config::probe_cache_s));
  if (ok(config::Id::probe_ms)) c.probe_budget_s = static_cast<double>(config::get(config::probe_ms)) / 1000.0;
  if (ok(config::Id::topo_file)) c.topo_file = config::get(config::topo_file);
  if (ok(config::Id::unexpected_bytes))
    c.fabric.unexpected_bytes = static_cast<std::size_t>(config::get(config::unexpected_bytes));
  if (ok(config::Id::shared_memory)) c.fabric.shared_memory = config::get(config::shared_memory) != 0;
  c.fabric.region = local_locality().region;
  auto& sockets = c.fabric.sockets;
  if (ok(config::Id::socket_ifaddr)) sockets.ifaddr = config::get(config::socket_ifaddr);
  if (ok(config::Id::socket_bind_any)) sockets.bind_any = config::get(config::socket_bind_any) != 0;
  if (ok(config::Id::handshake_s))
    sockets.handshake = std::chrono::milliseconds(std::llround(config::get(config::handshake_s) * 1000.0));
  sockets.keepalive = c.keepalive;
  if (ok(config::Id::advertise_addr)) {
    try {
      sockets.advertise = net::checked_advertise(config::get(config::advertise_addr));
    } catch (const InvalidArgument& e) {
      c.refused.push_back(e.what());
    }
  }
  if (ok(config::Id::port_range)) {
    try {
      sockets.ports = net::parse_port_range(config::get(config::port_range));
    } catch (const InvalidArgument& e) {
      c.refused.push_back(e.what());
    }
  }
  if (ok(config::Id::servers)) c.servers = static_cast<int>(config::get(config::servers));
  if (ok(config::Id::mesh_full_upto)) c.mesh_full_upto = static_cast<int>(config::get(config::mesh_full_upto));

  for (const config::Id id : kShared) {
    const auto& s = all[static_cast<std::size_t>(id)];
    const char* v = std::getenv(s.env);
    c.shared.emplace_back(s.env, v && *v ? v : s.default_value);
  }
  c.shared.emplace_back("transport", to_string(c.transport));  // STRATA_TRANSPORT or the call's
  return c;
}

std::string settings_verdict(const std::vector<std::string>& refused, const std::vector<std::string>& shared, int me) {
  auto who = [me](std::size_t r) {
    return static_cast<int>(r) == me ? std::string("this rank") : "rank " + std::to_string(r);
  };
  for (std::size_t r = 0; r < refused.size(); ++r)
    if (!refused[r].empty()) {
      std::string list;
      for (const auto& l : lines(refused[r])) list += (list.empty() ? "" : "; ") + l;
      return who(r) + " refuses its settings: " + list;
    }
  // Compared with the first rank that published any, line by line (every rank lists the
  // same settings in the same order).
  std::size_t first = 0;
  while (first < shared.size() && shared[first].empty()) ++first;
  if (first == shared.size()) return "";
  const auto base = lines(shared[first]);
  for (std::size_t r = first + 1; r < shared.size(); ++r) {
    if (shared[r].empty()) continue;
    const auto theirs = lines(shared[r]);
    for (std::size_t i = 0; i < base.size() && i < theirs.size(); ++i) {
      if (base[i] == theirs[i]) continue;
      const std::string var = base[i].substr(0, base[i].find('='));
      return var + " differs between ranks: " + base[i].substr(var.size() + 1) + " on " + who(first) + ", " +
             theirs[i].substr(theirs[i].find('=') + 1) + " on " + who(r) + "; every rank must set it alike";
    }
  }
  return "";
}

}  // namespace strata::detail
