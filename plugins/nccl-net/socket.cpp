#include "socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/keepalive.hpp"
#include "errors.hpp"
#include "log.hpp"
#include "strata/errors.hpp"

namespace strata::nccl_net {

namespace {

[[noreturn]] void fail(const char* what, int err) {
  // A reset or broken pipe means the peer is gone; anything else is local.
  const abi::Result code =
      (err == ECONNRESET || err == EPIPE || err == ECONNREFUSED) ? abi::remote_error : abi::system_error;
  throw NetError(code, std::string(what) + ": " + std::strerror(err));
}

std::atomic<long long> g_keepalive_ms{0}, g_stall_ms{0};

void keep_alive(int fd) {
  net::keep_alive(fd, std::chrono::milliseconds(g_keepalive_ms.load(std::memory_order_relaxed)),
                  std::chrono::milliseconds(g_stall_ms.load(std::memory_order_relaxed)));
}

Fd make_socket(int family) {
  Fd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) fail("socket", errno);
  return fd;
}

}  // namespace

void keep_sockets_alive(std::chrono::milliseconds idle, std::chrono::milliseconds stall) {
  g_keepalive_ms.store(idle.count(), std::memory_order_relaxed);
  g_stall_ms.store(stall.count(), std::memory_order_relaxed);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

std::string describe(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

Fd listen_on(const sockaddr_storage& addr, socklen_t len, const net::PortRange& ports, const char* who,
             std::uint16_t* port, int socket_buffer) {
  try {
    const auto l = net::listen_in_range(addr, len, ports, who, socket_buffer, true);
    *port = l.port;
    return Fd(l.fd);
  } catch (const TransportError& e) {
    throw NetError(abi::system_error, e.what());
  }
}

Fd start_connect(const sockaddr_storage& addr, socklen_t len, const net::PathTuning* tuning) {
  Fd fd = make_socket(addr.ss_family);
  set_nodelay(fd.get());
  keep_alive(fd.get());
  // Before connect, so the window scale negotiated in the handshake allows the buffers.
  if (tuning) tune_stream(fd.get(), *tuning);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0 && errno != EINPROGRESS)
    fail(("connect " + describe(addr)).c_str(), errno);
  return fd;
}

Dial dial_state(int fd) {
  // A second connect() reports the state without waiting: EISCONN once established.
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0) return Dial::connected;
  int err = 0;
  socklen_t err_len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) fail("getsockopt", errno);
  if (err == ECONNREFUSED) return Dial::refused;
  if (err != 0 && err != EINPROGRESS && err != EALREADY) fail("connect", err);
  return Dial::pending;
}

bool connect_finished(int fd) {
  const Dial d = dial_state(fd);
  if (d == Dial::refused) fail("connect", ECONNREFUSED);
  return d == Dial::connected;
}

sockaddr_storage local_address(int fd, socklen_t* len) {
  sockaddr_storage a{};
  *len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) fail("getsockname", errno);
  return a;
}

sockaddr_storage remote_address(int fd, socklen_t* len) {
  sockaddr_storage a{};
  *len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) fail("getpeername", errno);
  return a;
}

void set_port(sockaddr_storage& addr, std::uint16_t port) {
  if (addr.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&addr)->sin_port = htons(port);
  else
    reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = htons(port);
}

void cut(int fd) {
  // Not SHUT_RD: acknowledgements arriving at a socket shut for reading draw a reset,
  // which would fail the receiver's next write and discard what it has not read yet.
  ::shutdown(fd, SHUT_WR);
}

Fd accept_one(int listen_fd) {
  const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    set_nodelay(fd);
    keep_alive(fd);
    return Fd(fd);
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return Fd();
  fail("accept", errno);
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void tune_stream(int fd, const net::PathTuning& tuning) {
  static std::atomic<bool> told{false};
  const std::string notes = net::tune_path(fd, tuning);
  if (!notes.empty() && !told.exchange(true)) log::warn("striped streams: %s", notes.c_str());
}

bool ready(int fd, short events) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, 0) > 0;  // errors and hang-ups count: the next call reports them
}

std::size_t send_some(int fd, const iovec* iov, int count) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<std::size_t>(count);
  for (;;) {
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    fail("send", errno);
  }
}

std::size_t recv_some(int fd, void* buf, std::size_t n, bool* eof) {
  *eof = false;
  if (n == 0) return 0;
  for (;;) {
    const ssize_t got = ::recv(fd, buf, std::min<std::size_t>(n, INT_MAX), MSG_DONTWAIT);
    if (got > 0) return static_cast<std::size_t>(got);
    if (got == 0) {
      *eof = true;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    fail("recv", errno);
  }
}

}  // namespace strata::nccl_net
