#include "transport/asio_endpoint.hpp"

#include <unistd.h>

#include "base/accept_loop.hpp"
#include "base/listener.hpp"
#include "strata/errors.hpp"

namespace strata::transport {

namespace asio = boost::asio;
using asio::ip::tcp;

AsioEndpoint::AsioEndpoint(const std::string& who, int rank, const std::string& bind_host,
                           const net::SocketSettings& sockets, int socket_buffer)
    : who_(who), accept_trouble_(who + " on rank " + std::to_string(rank)) {
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(bind_host, ec);
  if (ec) throw TransportError(who_ + ": cannot listen on '" + bind_host + "': not an IP address");
  published_ = addr;
  const auto bind = net::bind_address(addr, sockets.bind_any);
  const auto l = net::listen_in_range(bind.to_string(), sockets.ports, who_ + " on rank " + std::to_string(rank),
                                      socket_buffer, true);
  acceptor_.assign(bind.is_v6() ? tcp::v6() : tcp::v4(), l.fd, ec);
  if (ec) {
    ::close(l.fd);
    throw TransportError(who_ + ": cannot listen on " + bind_host + ": " + ec.message());
  }
}

std::string AsioEndpoint::address() const {
  return published_.to_string() + ":" + std::to_string(acceptor_.local_endpoint().port());
}

void AsioEndpoint::set_peer_addresses(std::vector<std::string> addrs, int size) {
  if (static_cast<int>(addrs.size()) != size)
    throw TransportError(who_ + ": expected " + std::to_string(size) + " addresses");
  addrs_ = std::move(addrs);
}

void AsioEndpoint::close_listener() {
  boost::system::error_code ec;
  acceptor_.close(ec);
  accept_retry_.cancel();
}

bool AsioEndpoint::must_abort() {
  if (accept_trouble_.persistent(std::chrono::steady_clock::now())) abort(accept_trouble_.what());
  return aborted();
}

bool AsioEndpoint::poll() {
  if (io_.stopped()) io_.restart();
  return io_.poll() > 0;
}

}  // namespace strata::transport
