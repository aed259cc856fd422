// How this process's sockets listen, prove themselves and stay alive: resolved once per
// communicator from the settings (core/) and handed to every layer that listens or dials,
// so no layer below core reads the environment.
#pragma once

#include <chrono>
#include <string>

#include "base/listener.hpp"

namespace strata::net {

struct SocketSettings {
  // The address listeners publish and peers dial (STRATA_SOCKET_IFADDR); "" where it is
  // found from the connection that reaches the rendezvous root.
  std::string ifaddr;
  // Bind the wildcard of the published address's family instead (STRATA_SOCKET_BIND_ANY).
  bool bind_any = false;
  // How long a connection has to prove it knows the job's secret (STRATA_HANDSHAKE_S).
  std::chrono::milliseconds handshake{10000};
  // Idle time before the kernel's keepalive probes a connection (STRATA_KEEPALIVE_S).
  std::chrono::milliseconds keepalive{15000};
  // The ports every listener takes its port from (STRATA_PORT_RANGE); any by default.
  PortRange ports;
  // The IP address peers in other regions dial instead of the listening one
  // (STRATA_ADVERTISE_ADDR: a NAT's public side forwarding the same ports); "" for none.
  std::string advertise;
};

}  // namespace strata::net
