// Plain sockets for the transport fuzz targets: the fuzzer plays a peer over a real
// loopback connection. Closing with SO_LINGER 0 sends a reset instead of leaving a
// TIME_WAIT behind, so thousands of runs a second do not use up the ephemeral ports.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <poll.h>

#include <array>
#include <optional>
#include <string>

#include "bootstrap/handshake.hpp"

namespace strata::fuzz {

// "127.0.0.1:port" -> a connected blocking socket, or -1.
inline int connect_to(const std::string& address) {
  const auto colon = address.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &a.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// A listener on an ephemeral loopback port; *address gets "127.0.0.1:port".
inline int listen_on_loopback(std::string* address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) {
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

inline bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Reads whatever is waiting without blocking, and drops it.
inline void drain(int fd) {
  char buf[4096];
  while (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

// Reads exactly n bytes, calling pump() (the transport's progress) while none are
// waiting; false when the peer closes or nothing comes within a bounded number of tries.
template <class Pump>
bool read_exact(int fd, unsigned char* p, std::size_t n, Pump pump) {
  for (int tries = 0; n > 0 && tries < 20000; ++tries) {
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, 0) <= 0) {
      pump();
      continue;
    }
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return n == 0;
}

// The job's handshake (open secret, as the transports under test have) from either side,
// so the fuzzer's bytes reach what lies behind it.
template <class Pump>
bool prove_as_dialer(int fd, bootstrap::auth::Channel ch, bootstrap::auth::Bytes payload, Pump pump) {
  bootstrap::auth::Dialer d({}, ch, std::move(payload));
  if (!write_all(fd, d.hello().data(), d.hello().size())) return false;
  std::array<unsigned char, bootstrap::auth::kChallengeBytes> challenge{};
  if (!read_exact(fd, challenge.data(), challenge.size(), pump)) return false;
  const auto proof = d.answer(challenge);
  return proof && write_all(fd, proof->data(), proof->size());
}
template <class Pump>
bool answer_as_listener(int fd, bootstrap::auth::Channel ch, std::size_t payload_bytes, Pump pump) {
  bootstrap::auth::Acceptor a({}, ch, payload_bytes);
  std::array<unsigned char, bootstrap::auth::kHelloBytes> hello{};
  if (!read_exact(fd, hello.data(), hello.size(), pump)) return false;
  const auto challenge = a.challenge(hello);
  if (!challenge || !write_all(fd, challenge->data(), challenge->size())) return false;
  bootstrap::auth::Bytes proof(a.proof_bytes());
  return read_exact(fd, proof.data(), proof.size(), pump) && a.verify(proof).has_value();
}

inline void close_hard(int fd) {
  if (fd < 0) return;
  const linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

}  // namespace strata::fuzz
