// A dedicated server process: join the workers' rendezvous as transport rank
// workers + index, then run the shard loop until every worker has closed.
#include "core/config.hpp"
#include "base/log.hpp"
#include "bootstrap/tcp_store.hpp"
#include "core/launch_env.hpp"
#include "core/link_settings.hpp"
#include "core/settings_check.hpp"
#include "core/world_join.hpp"
#include "ps/shard_server.hpp"
#include "strata/errors.hpp"

namespace strata {

bool is_server_process() { return detail::is_server_role(); }

ServerStats serve(const ServerOptions& o) {
  if (o.servers < 1) throw InvalidArgument("serve: servers=" + std::to_string(o.servers) + " must be at least 1");
  if (o.index < 0 || o.index >= o.servers)
    throw InvalidArgument("serve: index " + std::to_string(o.index) + " is out of range for " +
                          std::to_string(o.servers) + " servers");
  if (o.workers < 1) throw InvalidArgument("serve: workers=" + std::to_string(o.workers) + " must be at least 1");
  const TransportKind kind = detail::resolve_transport(o.comm.transport);
  const auto timeout = detail::resolve_timeout(o.comm.timeout);
  const auto deadline = transport::Clock::now() + timeout;
  log::set_rank(o.workers + o.index);
  const auto [host, port] = bootstrap::split_host_port(o.root, "rendezvous address");
  const auto secret = detail::configured_secret().value_or(bootstrap::JobSecret{});
  auto tcp_store = std::make_shared<bootstrap::TcpStore>(host, port, deadline, secret, detail::socket_settings());
  bootstrap::PrefixStore store(tcp_store, "strata/");
  const detail::WorldShape w{o.workers + o.index, o.workers, o.servers};
  const auto joined = detail::exchange_localities(store, w, deadline, timeout);
  const auto& localities = joined.localities;
  // The workers' checks of their settings (core/settings_check.hpp): a server fails with them.
  std::vector<std::string> refused, shared;
  for (int r = 0; r < o.workers; ++r) {
    refused.push_back(joined.settings[static_cast<std::size_t>(r)].refused);
    shared.push_back(joined.settings[static_cast<std::size_t>(r)].shared);
  }
  if (const auto why = detail::settings_verdict(refused, shared, -1); !why.empty())
    throw InvalidArgument("dedicated server " + std::to_string(o.index) + ": " + why);
  auto t = detail::connect_world(store, kind, w, localities, deadline, secret, detail::check_settings(o.comm).fabric);
  transport::set_spin(std::chrono::microseconds(config::get(config::spin_us)));
  log::info("dedicated server " + std::to_string(o.index) + " of " + std::to_string(o.servers) + " serving " +
            std::to_string(o.workers) + " workers over " + t->name());
  ps::ShardServer server(*t, o.workers, o.index, o.servers, timeout);
  try {
    return server.run();
  } catch (const std::exception& e) {
    t->abort(e.what());  // workers waiting on this server fail now, not at their deadline
    throw;
  }
}

ServerStats serve_from_env(const CommOptions& comm) {
  if (!is_server_process()) throw InvalidArgument("serve_from_env: STRATA_ROLE is not 'server'");
  const auto info = detail::discover_server_launch();
  ServerOptions o;
  o.index = info.rank;
  o.workers = info.size;
  o.servers = detail::configured_servers();
  o.root = info.root;
  o.comm = comm;
  return serve(o);
}

}  // namespace strata
