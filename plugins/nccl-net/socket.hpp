// Non-blocking TCP sockets with an owning descriptor. Nothing here ever blocks: NCCL's
// proxy threads call connect/accept/test in a loop and must get control back at once.
// Every send uses MSG_NOSIGNAL, so a peer that vanished is an error code, not a SIGPIPE
// killing the application.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/listener.hpp"
#include "base/tcp_path.hpp"

namespace strata::nccl_net {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

std::string describe(const sockaddr_storage& addr);

// Bound to `addr` with an ephemeral port, listening; the chosen port goes to *port.
// Idle time after which the kernel probes every socket the plugin dials or accepts from
// now on (STRATA_KEEPALIVE_S; 0: none), and how long sent bytes may stay unacknowledged
// before the kernel ends the connection (a flow a middlebox forgot and drops silently;
// a striped stream is then redialled, as the WAN link's are; 0: the kernel's quarter of
// an hour). The plugin's settings are the process's, read once at init, so these are too.
void keep_sockets_alive(std::chrono::milliseconds idle, std::chrono::milliseconds stall);

// At a port of `ports` (STRATA_PORT_RANGE; any when unset), non-blocking; `who` names it
// in errors; socket_buffer > 0 sets the buffers accepted sockets inherit.
Fd listen_on(const sockaddr_storage& addr, socklen_t len, const net::PortRange& ports, const char* who,
             std::uint16_t* port, int socket_buffer = 0);
// A connect in progress (or done). A long-distance stream (`tuning` not null) gets its
// congestion control, retransmission floor and buffers first (net::tune_path).
Fd start_connect(const sockaddr_storage& addr, socklen_t len, const net::PathTuning* tuning);
// True once connected; false while in progress; throws if the connect failed.
bool connect_finished(int fd);
// The same, telling a refusal (nobody listens there any more) from other failures, which
// throw.
enum class Dial { pending, connected, refused };
Dial dial_state(int fd);
// Our end and the peer's end of a connected socket.
sockaddr_storage local_address(int fd, socklen_t* len);
sockaddr_storage remote_address(int fd, socklen_t* len);
void set_port(sockaddr_storage& addr, std::uint16_t port);
// Ends our sending direction after what is queued (emulated cuts; the caller stops
// reading).
void cut(int fd);
// One pending connection, or an invalid Fd when there is none.
Fd accept_one(int listen_fd);

void set_nodelay(int fd);
// net::tune_path, telling once per process what the kernel refused.
void tune_stream(int fd, const net::PathTuning& tuning);

// Whether the socket is readable (POLLIN) or writable (POLLOUT) now. poll() reads the
// socket state without taking the socket lock, unlike a recv/send that would fail with
// EAGAIN; a progress loop that spins on an idle socket thus stays out of the way of
// the kernel delivering into it.
bool ready(int fd, short events);

// Bytes written (0 if the socket is full). Throws NetError on failure.
std::size_t send_some(int fd, const iovec* iov, int count);
// Bytes read (0 if nothing is there); *eof set when the peer closed. Throws on failure.
std::size_t recv_some(int fd, void* buf, std::size_t n, bool* eof);

}  // namespace strata::nccl_net
