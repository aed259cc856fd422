// The rendezvous store over TCP: a server (run by rank 0, or by UniqueId::create) and a
// client every rank uses. Messages are bootstrap.proto's StoreRequest/StoreResponse.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/socket_settings.hpp"
#include "bootstrap/auth_gate.hpp"
#include "bootstrap/job_secret.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/store_protocol.hpp"

namespace strata::bootstrap {

// "host:port" → parts; throws InvalidArgument naming `what` when malformed.
std::pair<std::string, std::uint16_t> split_host_port(const std::string& addr,
                                                      const std::string& what);

// How the server protects itself from whatever connects to its port: everything is
// bounded by a limit rather than by what a length prefix claims.
struct StoreServerLimits {
  StoreLimits store;                                  // sizes of requests, values, replies
  std::size_t max_connections = 16384;                // more are closed at once
  std::size_t max_buffered = 64u << 20;               // request bytes being received, all connections
  std::chrono::milliseconds first_request{30000};     // a new connection's first request, whole
  std::chrono::milliseconds frame{30000};             // any request, from its length to its last byte
  auth::GateLimits handshake;                         // before any of that: the job's handshake
  std::chrono::milliseconds keepalive{15000};         // idle time before keepalive probes
  bool bind_any = false;                              // net::bind_address
  // The limits above with the handshake, keepalive and binding `sockets` say.
  static StoreServerLimits with(const net::SocketSettings& sockets) {
    StoreServerLimits l;
    l.handshake.deadline = sockets.handshake;
    l.keepalive = sockets.keepalive;
    l.bind_any = sockets.bind_any;
    return l;
  }
};

class StoreServer {
 public:
  // Binds host:port (port 0 picks a free one) and serves on a thread of its own. Only
  // clients that prove they know `secret` get a request read.
  StoreServer(const std::string& host, std::uint16_t port, const JobSecret& secret, StoreServerLimits limits = {});
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  std::uint16_t port() const;
  // Thread-safe: connections open now, and why the listener could not accept, if it could not.
  std::size_t connections() const;
  std::string trouble() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

class TcpStore : public Store, public KnowsLocalAddress {
 public:
  // Retries the connection until `deadline`: the server may start after the client.
  // Proves it knows `secret` (and checks that the server does) before any request.
  TcpStore(const std::string& host, std::uint16_t port, Clock::time_point deadline, const JobSecret& secret,
           const net::SocketSettings& sockets = {});
  ~TcpStore() override;
  void set(const std::string& key, const std::string& value) override;
  std::vector<std::string> get(const std::vector<std::string>& keys,
                               Clock::time_point deadline) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  using Store::get;
  // The local address of the connection to the server: the interface peers can reach.
  std::string local_address() const override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::bootstrap
