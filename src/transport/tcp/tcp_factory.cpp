#include "core/asio.hpp"

#include "bootstrap/tcp_store.hpp"
#include "core/config.hpp"
#include "transport/factory.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace strata::transport {

namespace {

// The address peers can reach us on: the configured one, else the interface that
// reaches the rendezvous root (right for one machine and for a flat network alike).
std::string listen_host(bootstrap::Store& store) {
  const std::string configured = config::get_string("socket_ifaddr");
  if (!configured.empty()) return configured;
  if (auto* tcp_store = dynamic_cast<bootstrap::TcpStore*>(&store))
    return tcp_store->local_address();
  if (auto* prefixed = dynamic_cast<bootstrap::PrefixStore*>(&store))
    if (auto* inner = dynamic_cast<bootstrap::TcpStore*>(prefixed->inner()))
      return inner->local_address();
  return "127.0.0.1";
}

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(int rank, int size, bootstrap::Store& store,
                                              Clock::time_point deadline) {
  auto t = std::make_unique<tcp::TcpTransport>(rank, size, listen_host(store));
  store.set("tcp/" + std::to_string(rank), t->address());
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("tcp/" + std::to_string(r));
  t->set_peer_addresses(store.get(keys, deadline));
  return t;
}

}  // namespace strata::transport
