#include "base/listener.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>
#include <optional>

#include "strata/errors.hpp"

namespace strata::net {

namespace {

void set_port(sockaddr_storage& a, std::uint16_t port) {
  if (a.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = htons(port);
  else
    reinterpret_cast<sockaddr_in*>(&a)->sin_port = htons(port);
}

std::uint16_t port_of(const sockaddr_storage& a) {
  return ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port
                                       : reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
}

std::string host_of(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  const void* raw = a.ss_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr)
                                            : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&a)->sin_addr);
  ::inet_ntop(a.ss_family, raw, text, sizeof text);
  return text;
}

std::optional<std::uint16_t> port_number(std::string_view t) {
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc{} || end != t.data() + t.size() || v < 1 || v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

// One attempt: a fresh socket bound and listening at `port`, or -1 with errno set.
int try_listen(const sockaddr_storage& addr, socklen_t len, std::uint16_t port, int socket_buffer, bool nonblocking) {
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return -1;
  // A port whose last connections linger in TIME_WAIT stays usable; two listeners still
  // cannot share one (the second's listen() fails, and the next port is tried).
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (socket_buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &socket_buffer, sizeof socket_buffer);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &socket_buffer, sizeof socket_buffer);
  }
  sockaddr_storage at = addr;
  set_port(at, port);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&at), len) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

}  // namespace

std::string PortRange::text() const {
  if (any()) return "any";
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
}

PortRange parse_port_range(std::string_view text, std::string_view setting) {
  if (text.empty() || text == "0" || text == "any") return {};
  auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(setting) + "='" + std::string(text) + "': " + why);
  };
  const auto dash = text.find('-');
  const auto lo = port_number(text.substr(0, dash));
  const auto hi = dash == std::string_view::npos ? lo : port_number(text.substr(dash + 1));
  if (!lo || !hi) throw bad("expected a port (1-65535) or a range LO-HI, e.g. 40000-40100");
  if (*hi < *lo) throw bad("the range ends before it starts");
  return PortRange{*lo, *hi};
}

Listening listen_in_range(const sockaddr_storage& addr, socklen_t len, const PortRange& ports, const std::string& who,
                          int socket_buffer, bool nonblocking) {
  const std::string where = host_of(addr);
  if (ports.any()) {
    const int fd = try_listen(addr, len, 0, socket_buffer, nonblocking);
    if (fd < 0) throw TransportError(who + ": cannot listen on " + where + ": " + std::strerror(errno));
    sockaddr_storage bound{};
    socklen_t bound_len = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
    return {fd, port_of(bound)};
  }
  const std::size_t n = ports.size();
  const std::size_t start = (static_cast<std::size_t>(::getpid()) * 7919 + std::hash<std::string>{}(who)) % n;
  for (std::size_t i = 0; i < n; ++i) {
    const auto port = static_cast<std::uint16_t>(ports.lo + (start + i) % n);
    const int fd = try_listen(addr, len, port, socket_buffer, nonblocking);
    if (fd >= 0) return {fd, port};
    if (errno != EADDRINUSE) {
      throw TransportError(who + ": cannot listen on " + where + ":" + std::to_string(port) + ": " +
                           std::strerror(errno));
    }
  }
  throw TransportError(who + ": no free port on " + where + " in STRATA_PORT_RANGE=" + ports.text() + " (all " +
                       std::to_string(n) + " taken; widen the range: each rank of a host listens on a few)");
}

Listening listen_in_range(const std::string& ip, const PortRange& ports, const std::string& who, int socket_buffer,
                          bool nonblocking) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  std::string host = ip;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    len = sizeof *v4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    len = sizeof *v6;
  } else {
    throw TransportError(who + ": cannot listen on '" + ip + "': not an IP address");
  }
  return listen_in_range(ss, len, ports, who, socket_buffer, nonblocking);
}

std::string advertised(const std::string& address, const std::string& advertise) {
  if (advertise.empty()) return address;
  const std::string port = address.substr(address.rfind(':') + 1);
  const bool v6 = advertise.find(':') != std::string::npos;
  return address + "|" + (v6 ? "[" + advertise + "]" : advertise) + ":" + port;
}

std::string reachable(const std::string& published, bool same_region) {
  const auto bar = published.find('|');
  if (bar == std::string::npos) return published;
  return same_region ? published.substr(0, bar) : published.substr(bar + 1);
}

std::string checked_advertise(const std::string& text) {
  if (text.empty()) return text;
  in6_addr a6{};
  in_addr a4{};
  if (::inet_pton(AF_INET, text.c_str(), &a4) != 1 && ::inet_pton(AF_INET6, text.c_str(), &a6) != 1)
    throw InvalidArgument("STRATA_ADVERTISE_ADDR='" + text + "': not an IP address");
  return text;
}

}  // namespace strata::net
