#include "bootstrap/liveness_port.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/accept_loop.hpp"
#include "base/asio.hpp"
#include "strata/errors.hpp"

namespace strata::bootstrap {

namespace {

struct Port {
  std::mutex mu;
  pid_t pid = 0;  // the process the socket belongs to
  int fd = -1;
  std::string address;
};

Port& port() {
  static Port p;
  return p;
}

// A forked child must not answer for its parent (nor its parent for it): it closes the
// socket it inherited and opens its own on first use.
void forget_in_child() {
  Port& p = port();
  if (p.fd >= 0) ::close(p.fd);
  p.fd = -1;
  p.pid = 0;
  p.address.clear();
}

}  // namespace

std::string liveness_address(const std::string& host, const net::SocketSettings& sockets) {
  static std::once_flag hooked;
  std::call_once(hooked, [] { ::pthread_atfork(nullptr, nullptr, forget_in_child); });
  Port& p = port();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.pid == ::getpid()) return p.address;
  boost::system::error_code ec;
  const auto published = boost::asio::ip::make_address(host, ec);
  if (ec) throw TransportError("liveness port: '" + host + "' is not an IP address");
  // Like every listener of the job: the job's address, or all with STRATA_SOCKET_BIND_ANY.
  const auto bind = net::bind_address(published, sockets.bind_any);
  const auto l = net::listen_in_range(bind.to_string(), sockets.ports, "liveness port");
  const int fd = l.fd;
  p.fd = fd;
  p.pid = ::getpid();
  p.address = (published.is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(l.port);
  // Connections are taken and closed at once, for the life of the process.
  std::thread([fd] {
    for (;;) {
      const int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) ::close(c);
      else if (errno == EBADF || errno == EINVAL) return;  // closed: a forked child let it go
    }
  }).detach();
  return p.address;
}

}  // namespace strata::bootstrap
