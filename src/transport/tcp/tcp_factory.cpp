#include "transport/address_exchange.hpp"
#include "transport/factory.hpp"
#include "transport/host_segment.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace strata::transport {

std::unique_ptr<Transport> make_tcp_transport(int rank, int size, bootstrap::Store& store,
                                              Clock::time_point deadline, const bootstrap::JobSecret& secret,
                                              const FabricSettings& settings) {
  auto t = std::make_unique<tcp::TcpTransport>(rank, size, listen_host(store, settings.sockets.ifaddr), secret,
                                               settings.unexpected_bytes, settings.sockets);
  t->set_peer_addresses(exchange_addresses(store, "tcp", rank, size, t->address(), deadline));
  // Ranks of one host move collectives' data through a shared segment, as over UCX; only
  // the notices that pace them go through the sockets.
  t->use_host_segment(std::make_shared<HostSegment>(rank, find_host_peers(store, "tcp-host/", rank, size, deadline),
                                                    settings.shared_memory, store, "tcp-shm/",
                                                    deadline));
  return t;
}

}  // namespace strata::transport
