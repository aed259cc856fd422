// What the Boost.Asio transports (tcp/, and the WAN link in wan/) share: one io_context
// that only the engine thread runs, a listener whose accepts survive running out of
// descriptors for a while (base/accept_loop.hpp), the peers' published addresses, and
// the abort flag that any thread may set and that wakes a wait in progress.
//
// A transport holds one in its base (asio_transport.hpp), so it is destroyed last: the
// transport's sockets and timers live on its io_context and must go before it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/accept_loop.hpp"
#include "base/asio.hpp"
#include "base/socket_settings.hpp"
#include "base/sys_errors.hpp"
#include "transport/abort_state.hpp"
#include "transport/asio_waiter.hpp"

namespace strata::transport {

class AsioEndpoint {
 public:
  // Listens on bind_host (an IP address) at once; `who` ("tcp transport") names the
  // transport in errors. socket_buffer > 0 sets SO_RCVBUF and SO_SNDBUF on the listener
  // before it listens, so accepted sockets inherit them and window scaling covers them.
  // Its port comes from sockets.ports; it binds the wildcard with sockets.bind_any.
  AsioEndpoint(const std::string& who, int rank, const std::string& bind_host, const net::SocketSettings& sockets,
               int socket_buffer = 0);

  boost::asio::io_context& io() { return io_; }
  std::string address() const;  // "ip:port" to publish
  // Every rank's published address, indexed by rank; throws unless there are `size`.
  void set_peer_addresses(std::vector<std::string> addrs, int size);
  const std::string& peer_address(int peer) const { return addrs_.at(static_cast<std::size_t>(peer)); }

  // Hands every accepted socket to on_socket until close_listener().
  template <class OnSocket>
  void accept(OnSocket on_socket) {
    net::accept_forever(acceptor_, accept_retry_, accept_trouble_, std::move(on_socket));
  }
  void close_listener();

  // The first thing a transport's progress() asks: true when it must stop and fail what
  // is pending. A listener that has not accepted for long (descriptors exhausted) aborts
  // the transport then, since peers can no longer reach it.
  bool must_abort();
  void abort(const std::string& why) {
    abort_.set(why);
    io_.stop();  // thread-safe; wakes a wait in progress
  }
  bool aborted() const { return abort_.aborted(); }
  std::string abort_reason() const { return abort_.reason(); }
  std::string trouble() const { return accept_trouble_.what(); }

  // Runs ready handlers without blocking; true if any ran.
  bool poll();
  // Runs at most one handler, waiting at most about `max`.
  void run_one_for(std::chrono::microseconds max) { waiter_.run_one_for(max); }

 private:
  std::string who_;
  std::vector<std::string> addrs_;
  boost::asio::io_context io_{1};
  AsioWaiter waiter_{io_};  // after io_: its timer lives on it
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  boost::asio::ip::address published_;  // the job's address; the acceptor may bind the wildcard
  boost::asio::steady_timer accept_retry_{io_};
  sys::AcceptTrouble accept_trouble_;
  AbortState abort_;
};

}  // namespace strata::transport
