#include "transport/address_exchange.hpp"

#include "base/listener.hpp"
#include "strata/errors.hpp"
#include "transport/factory.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace strata::transport {

std::unique_ptr<Transport> make_tcp_transport(int rank, int size, bootstrap::Store& store,
                                              Clock::time_point deadline, const bootstrap::JobSecret& secret,
                                              const FabricSettings& settings) {
  auto t = std::make_unique<tcp::TcpTransport>(rank, size, listen_host(store, settings.sockets.ifaddr), secret,
                                               settings.unexpected_bytes, settings.sockets);
  // "<region>\n<address>", the address "private|public" behind NAT (net::advertised):
  // without the WAN link, peers in other regions dial this transport directly.
  const auto records = exchange_addresses(store, "tcp", rank, size,
                                          settings.region + '\n' + net::advertised(t->address(), settings.sockets.advertise),
                                          deadline);
  std::vector<std::string> addresses;
  for (std::size_t p = 0; p < records.size(); ++p) {
    const auto cut = records[p].find('\n');
    if (cut == std::string::npos)
      throw TransportError("tcp transport: rank " + std::to_string(p) + " published a malformed address record");
    addresses.push_back(net::reachable(records[p].substr(cut + 1), records[p].compare(0, cut, settings.region) == 0));
  }
  t->set_peer_addresses(addresses);
  return t;
}

}  // namespace strata::transport
