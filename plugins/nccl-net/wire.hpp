// A connected stream socket as the comms use it: clear TCP, or TLS 1.3 over it (the
// striped path between regions with STRATA_WAN_TLS=1). Both answer the same
// non-blocking calls as socket.hpp, so the comms move bytes the same way either way.
//
// TLS keeps OpenSSL's rule that a write which could not go out whole must be retried
// with the same bytes: a send copies up to kStage bytes of the caller's iovecs into the
// wire's own staging buffer and reports them as taken, as the kernel would, and the
// wire writes them out in later calls (send_some, flush). So a caller may reuse or
// reorder its buffers freely, but must call flush() while it has nothing else to send
// until it returns false, or staged bytes wait. Reading hands back what one or more TLS
// records decrypted to; ready(POLLIN) counts what OpenSSL already holds.
//
// In TLS 1.3 the client finishes its handshake before the server has checked the
// client's certificate, so the server ends its handshake with a confirmation inside TLS
// that the client waits for: a client whose certificate was refused learns it from the
// server's alert at connection time, not at its first send.
//
// The TLS context is process-wide (plugin_tls()): the certificates of
// STRATA_TLS_CERT/_KEY/_CA, else the job's secret as a pre-shared key
// (wan/tls.hpp, as libstrata's WAN link). Both ends authenticate each other in the
// handshake; a redialled stream runs it again.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <string>

#include "socket.hpp"

struct ssl_st;
struct ssl_ctx_st;

namespace strata::nccl_net {

class Wire {
 public:
  static constexpr std::size_t kStage = 64u << 10;

  Wire() = default;
  explicit Wire(Fd fd);
  Wire(Wire&&) noexcept;
  Wire& operator=(Wire&&) noexcept;
  ~Wire();

  int fd() const { return fd_.get(); }
  explicit operator bool() const { return static_cast<bool>(fd_); }
  bool tls() const { return ssl_ != nullptr; }
  // The socket back, for a clear wire that becomes something else (the UCX bootstrap).
  Fd take_fd();

  // Runs TLS on the connected socket: as the client (the side that dialled) or the
  // server. handshake() then advances it, with the server's confirmation; true once done.
  // Throws NetError(remote_error) naming `peer` and OpenSSL's reason (a certificate the
  // authority did not sign, the peer closing because it runs without TLS or another key).
  void start_tls(ssl_ctx_st* ctx, bool client);
  bool handshake(const std::string& peer);

  bool ready(short events) const;
  // Bytes taken from iov (0 when the socket is full). Throws NetError on failure.
  std::size_t send_some(const iovec* iov, int count);
  // Bytes read (0 if nothing is there); *eof when the peer closed. Throws on failure.
  std::size_t recv_some(void* buf, std::size_t n, bool* eof);
  // TLS: writes what is staged, as far as the socket takes it; true if anything went.
  // False at once on a clear wire.
  bool flush();
  bool staged() const { return stage_off_ < stage_len_; }

 private:
  struct SslFree {
    void operator()(ssl_st* s) const noexcept;
  };
  Fd fd_;
  std::unique_ptr<ssl_st, SslFree> ssl_;
  std::unique_ptr<unsigned char[]> stage_;  // TLS: plaintext taken, not yet written
  std::size_t stage_len_ = 0, stage_off_ = 0;
  bool client_ = false, shaken_ = false;
  std::size_t confirm_got_ = 0;  // client: bytes of the server's confirmation read
};

// The TLS context for striped connections, built at the first call from
// STRATA_WAN_TLS/STRATA_TLS_* and the job's secret; null when STRATA_WAN_TLS is off.
// Throws NetError(invalid_usage) naming the setting that cannot be used (a missing
// file, TLS by the secret in a job without one).
ssl_ctx_st* plugin_tls();

}  // namespace strata::nccl_net
