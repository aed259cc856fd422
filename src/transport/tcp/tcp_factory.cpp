#include "transport/address_exchange.hpp"
#include "transport/factory.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace strata::transport {

std::unique_ptr<Transport> make_tcp_transport(int rank, int size, bootstrap::Store& store,
                                              Clock::time_point deadline, const bootstrap::JobSecret& secret,
                                              const FabricSettings& settings) {
  auto t = std::make_unique<tcp::TcpTransport>(rank, size, listen_host(store, settings.sockets.ifaddr), secret,
                                               settings.unexpected_bytes, settings.sockets);
  t->set_peer_addresses(exchange_addresses(store, "tcp", rank, size, t->address(), deadline));
  return t;
}

}  // namespace strata::transport
