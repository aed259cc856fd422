// Restoring a broken striped stream. NCCL may close its listen comm as soon as a
// connection is accepted, so nothing can redial the listener; instead the sending side
// of a striped connection listens on a port of its own (announced in its hellos,
// kRejoinable), and the receiving side, on a stream that broke (error, end of stream,
// CRC mismatch), dials it and sends a kRejoin hello naming the connection and stream.
// The sender then resends every frame not acknowledged and the receiver drops what it
// already had (link/stream_core.hpp), so a cut stream costs time, not the connection.
//
// A refused dial means the sender's comm is gone (closed, or its process died): the
// stream is then closed for good rather than retried. With TLS, the redialled stream runs
// a new TLS handshake (the receiver as client) after the job's.
#pragma once

#include <cstdint>
#include <vector>

#include <memory>

#include "auth_step.hpp"
#include "handle.hpp"
#include "socket.hpp"
#include "wire.hpp"

namespace strata::nccl_net {

// The sender's port for rejoins of one connection's streams.
class RejoinListener {
 public:
  RejoinListener() = default;
  // Listens on the address of our end of `stream` (the interface that reaches the peer);
  // redialled streams get `socket_buffer` (> 0) as their SO_SNDBUF/SO_RCVBUF, and run in
  // TLS when `tls` is set.
  RejoinListener(int stream, std::uint64_t conn_id, int streams, int socket_buffer, ssl_ctx_st* tls,
                 const net::PortRange& ports);
  explicit operator bool() const { return static_cast<bool>(fd_); }
  std::uint16_t port() const { return port_; }
  // A stream that came back: its index and socket; index -1 while none has. Connections
  // that do not prove the job's secret with a matching rejoin hello are dropped, so a
  // stranger cannot replace a stream; so is one whose TLS handshake fails. Never blocks.
  int poll(Wire* out);

 private:
  struct Incoming {
    Wire wire;
    AcceptAuth auth{plugin_secret()};
    int index = -1;  // once proven: the stream it restores, while TLS shakes hands
  };
  // The stream `in` restores once it is ready; -1 while pending; -2 when it was dropped.
  int advance(Incoming& in);
  Fd fd_;
  ssl_ctx_st* tls_ = nullptr;
  std::uint16_t port_ = 0;
  std::uint64_t conn_id_ = 0;
  int streams_ = 0;
  std::vector<Incoming> incoming_;
};

// The receiver's dial of one stream back to the sender: connect, then the rejoin hello.
class Redial {
 public:
  Redial(const sockaddr_storage& addr, socklen_t len, const Hello& first, int stream, const net::PathTuning& tuning,
         ssl_ctx_st* tls);
  enum class State { pending, done, refused };
  // Advances without blocking; throws NetError when the dial fails otherwise (the caller
  // retries until its deadline).
  State step();
  Wire take() { return std::move(wire_); }

 private:
  Wire wire_;
  Hello hello_{};
  std::unique_ptr<DialAuth> auth_;  // once connected: the rejoin hello goes as its proof
  bool connected_ = false, proven_ = false;
  ssl_ctx_st* tls_;
};

}  // namespace strata::nccl_net
