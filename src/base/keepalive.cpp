#include "base/keepalive.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

namespace strata::net {

void keep_alive(int fd, std::chrono::milliseconds idle, std::chrono::milliseconds unacked) {
  if (unacked.count() > 0) {
    const unsigned ms = static_cast<unsigned>(unacked.count());
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
  }
  if (idle.count() <= 0) return;
  const int on = 1, first = std::max(1, static_cast<int>(idle.count() / 1000)), every = std::max(1, first / 3), count = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &first, sizeof first);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &every, sizeof every);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

}  // namespace strata::net
