// Listening sockets that a firewall can be told about: every listener of the job (TCP
// transport, WAN link, control mesh, liveness port, the NCCL plugin's) takes its port
// from one range (STRATA_PORT_RANGE) when one is set, instead of whatever the kernel
// hands out.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace strata::net {

// Ports lo..hi, inclusive; lo == 0: any port the kernel picks.
struct PortRange {
  std::uint16_t lo = 0, hi = 0;
  bool any() const { return lo == 0; }
  std::size_t size() const { return any() ? 0 : static_cast<std::size_t>(hi - lo) + 1; }
  std::string text() const;  // "40000-40100", or "any"
  bool operator==(const PortRange&) const = default;
};

// "", "0" or "any": any port; "P": that one; "LO-HI" with 1 <= LO <= HI <= 65535.
// Throws InvalidArgument naming `setting` and the text otherwise.
PortRange parse_port_range(std::string_view text, std::string_view setting = "STRATA_PORT_RANGE");

// A socket listening on `addr` (its port ignored) at a port of `ports`: each port of the
// range in turn, starting at one that depends on the process and `who` (so the ranks of
// one host do not all race for the first), until one binds and listens. Close-on-exec
// (non-blocking too with `nonblocking`); socket_buffer > 0 sets SO_RCVBUF and SO_SNDBUF
// before listening, so accepted sockets inherit them. Throws TransportError naming `who`,
// the address and the range when no port of it is free, or on any other failure.
struct Listening {
  int fd = -1;  // the caller's to close
  std::uint16_t port = 0;
};
Listening listen_in_range(const sockaddr_storage& addr, socklen_t len, const PortRange& ports, const std::string& who,
                          int socket_buffer = 0, bool nonblocking = false);

// The same for an IP address in text ("10.0.0.1", "::1").
Listening listen_in_range(const std::string& ip, const PortRange& ports, const std::string& who, int socket_buffer = 0,
                          bool nonblocking = false);

// Behind NAT a listener is reached at another address than the one it binds
// (STRATA_ADVERTISE_ADDR), on the same port. A published address then carries both,
// "10.0.0.5:40001|203.0.113.7:40001"; a peer in the same region dials the first, one in
// another region the second.
std::string advertised(const std::string& address, const std::string& advertise);  // "" advertise: address
std::string reachable(const std::string& published, bool same_region);
// The address, checked to be an IP address ("" stays ""); InvalidArgument naming
// STRATA_ADVERTISE_ADDR otherwise.
std::string checked_advertise(const std::string& text);

}  // namespace strata::net
