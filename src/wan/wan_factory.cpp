#include "base/listener.hpp"
#include "transport/address_exchange.hpp"
#include "wan/wan_transport.hpp"

namespace strata::wan {

std::unique_ptr<transport::Transport> make_wan_transport(int rank, int size,
                                                         bootstrap::Store& store,
                                                         Clock::time_point deadline,
                                                         const WanOptions& options) {
  auto t = std::make_unique<WanTransport>(rank, size, transport::listen_host(store, options.sockets.ifaddr), options);
  t->set_peer_addresses(
      transport::exchange_addresses(store, "wan", rank, size,
                                    net::reachable(net::advertised(t->address(), options.sockets.advertise), false),
                                    deadline));
  return t;
}

}  // namespace strata::wan
