// A dedicated server process: join the workers' rendezvous as transport rank
// workers + index, then run the shard loop until every worker has closed.
#include <cstdlib>

#include "bootstrap/tcp_store.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/world_join.hpp"
#include "ps/shard_server.hpp"
#include "strata/errors.hpp"

namespace strata {

namespace {

int env_int(const char* name, int lo) {
  const char* v = std::getenv(name);
  if (!v || !*v) throw InvalidArgument(std::string("a dedicated server needs ") + name + " (STRATA_ROLE=server)");
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end || x < lo || x > 1 << 20)
    throw InvalidArgument(std::string(name) + "='" + v + "' is not an integer of at least " + std::to_string(lo));
  return static_cast<int>(x);
}

}  // namespace

bool is_server_process() {
  const std::string role = config::get_string("role");
  if (role != "worker" && role != "server")
    throw InvalidArgument("STRATA_ROLE='" + role + "' is not one of worker, server");
  return role == "server";
}

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
  auto tcp_store = std::make_shared<bootstrap::TcpStore>(host, port, deadline);
  bootstrap::PrefixStore store(tcp_store, "strata/");
  const detail::WorldShape w{o.workers + o.index, o.workers, o.servers};
  const auto localities = detail::exchange_localities(store, w, deadline, timeout);
  auto t = detail::connect_world(store, kind, w, localities, deadline);
  transport::set_spin(std::chrono::microseconds(std::max<std::int64_t>(0, config::get_int("spin_us"))));
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
  ServerOptions o;
  o.index = env_int("STRATA_RANK", 0);
  o.workers = env_int("STRATA_WORLD_SIZE", 1);
  o.servers = detail::configured_servers();
  const char* root = std::getenv("STRATA_ROOT");
  if (!root || !*root) throw InvalidArgument("a dedicated server needs STRATA_ROOT (STRATA_ROLE=server)");
  o.root = root;
  o.comm = comm;
  return serve(o);
}

}  // namespace strata
