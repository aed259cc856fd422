#include "wire.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "auth_step.hpp"
#include "core/link_settings.hpp"
#include "errors.hpp"
#include "log.hpp"
#include "strata/errors.hpp"
#include "wan/tls.hpp"

namespace strata::nccl_net {

namespace {

// OpenSSL's reasons for the last failure on this thread, oldest first.
std::string openssl_reasons() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no reason given" : out;
}

// Throws the failure of a call on `ssl` (not one to retry), `what` naming the call.
[[noreturn]] void tls_failure(ssl_st* ssl, int err, const std::string& what) {
  if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN) {
    const int e = err == SSL_ERROR_SYSCALL ? errno : 0;
    const std::string why = e ? std::strerror(e) : "the peer closed the connection";
    ERR_clear_error();
    throw NetError(abi::remote_error, what + ": " + why);
  }
  std::string why = openssl_reasons();
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) why += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
  throw NetError(abi::remote_error, what + ": " + why);
}

bool retry_later(int err) { return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE; }

constexpr char kConfirm[8] = {'S', 'T', 'R', 'A', 'T', 'L', 'S', '1'};

}  // namespace

void Wire::SslFree::operator()(ssl_st* s) const noexcept { SSL_free(s); }

Wire::Wire(Fd fd) : fd_(std::move(fd)) {}
Wire::Wire(Wire&&) noexcept = default;
Wire& Wire::operator=(Wire&&) noexcept = default;
Wire::~Wire() = default;

Fd Wire::take_fd() {
  if (ssl_) misuse("the socket of a TLS stream taken from under it");
  return std::move(fd_);
}

void Wire::start_tls(ssl_ctx_st* ctx, bool client) {
  ERR_clear_error();
  ssl_.reset(SSL_new(ctx));
  if (!ssl_ || SSL_set_fd(ssl_.get(), fd_.get()) != 1)
    throw NetError(abi::system_error, "TLS: cannot set up a stream: " + openssl_reasons());
  // A send stages its bytes and retries from the stage, which stays put; records go out
  // one by one as the socket takes them.
  SSL_set_mode(ssl_.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // A closed socket reads as the end of the stream, as in clear text: frames carry their
  // own lengths and goodbyes, so a cut is never taken for a complete message.
  SSL_set_options(ssl_.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_set_read_ahead(ssl_.get(), 1);
  SSL_set_num_tickets(ssl_.get(), 0);  // nothing resumes: a redial runs a full handshake
  client_ = client;
  if (client) SSL_set_connect_state(ssl_.get());
  else SSL_set_accept_state(ssl_.get());
  stage_ = std::make_unique<unsigned char[]>(kStage);
}

bool Wire::handshake(const std::string& peer) {
  const std::string what = "TLS handshake with " + peer;
  if (!shaken_) {
    ERR_clear_error();
    const int rc = SSL_do_handshake(ssl_.get());
    if (rc != 1) {
      const int err = SSL_get_error(ssl_.get(), rc);
      if (retry_later(err)) return false;
      tls_failure(ssl_.get(), err, what);
    }
    shaken_ = true;
    if (!client_) {
      const iovec iov{const_cast<char*>(kConfirm), sizeof kConfirm};
      send_some(&iov, 1);  // staged; goes out with the comm's first writes if not now
    }
  }
  if (!client_) return true;
  char got[sizeof kConfirm];
  while (confirm_got_ < sizeof kConfirm) {
    bool eof = false;
    std::size_t n = 0;
    try {
      n = recv_some(got, sizeof kConfirm - confirm_got_, &eof);
    } catch (const NetError& e) {  // the server's alert: it refused our certificate
      throw NetError(e.code(), what + ": " + e.what());
    }
    if (eof)
      throw NetError(abi::remote_error, what + ": the peer closed the connection before confirming it (it refused "
                                               "this rank's certificate, or runs without TLS)");
    if (n == 0) return false;
    if (std::memcmp(got, kConfirm + confirm_got_, n) != 0)
      throw NetError(abi::remote_error, what + ": the peer's confirmation is garbled");
    confirm_got_ += n;
  }
  return true;
}

bool Wire::ready(short events) const {
  if (ssl_ && (events & POLLIN) && SSL_has_pending(ssl_.get())) return true;
  return nccl_net::ready(fd_.get(), events);
}

std::size_t Wire::send_some(const iovec* iov, int count) {
  if (!ssl_) return nccl_net::send_some(fd_.get(), iov, count);
  flush();
  if (staged()) return 0;
  std::size_t taken = 0;
  for (int i = 0; i < count && taken < kStage; ++i) {
    const std::size_t n = std::min(iov[i].iov_len, kStage - taken);
    std::memcpy(stage_.get() + taken, iov[i].iov_base, n);
    taken += n;
  }
  stage_len_ = taken;
  stage_off_ = 0;
  flush();
  return taken;
}

bool Wire::flush() {
  bool moved = false;
  while (ssl_ && staged()) {
    ERR_clear_error();
    std::size_t wrote = 0;
    const int rc = SSL_write_ex(ssl_.get(), stage_.get() + stage_off_, stage_len_ - stage_off_, &wrote);
    if (rc != 1) {
      const int err = SSL_get_error(ssl_.get(), rc);
      if (retry_later(err)) break;
      tls_failure(ssl_.get(), err, "TLS send");
    }
    stage_off_ += wrote;
    moved = true;
  }
  return moved;
}

std::size_t Wire::recv_some(void* buf, std::size_t n, bool* eof) {
  if (!ssl_) return nccl_net::recv_some(fd_.get(), buf, n, eof);
  *eof = false;
  if (n == 0) return 0;
  ERR_clear_error();
  std::size_t got = 0;
  const int rc = SSL_read_ex(ssl_.get(), buf, n, &got);
  if (rc == 1) return got;
  const int err = SSL_get_error(ssl_.get(), rc);
  if (err == SSL_ERROR_ZERO_RETURN) {
    *eof = true;
    return 0;
  }
  if (retry_later(err)) return 0;
  tls_failure(ssl_.get(), err, "TLS receive");
}

ssl_ctx_st* plugin_tls() {
  static wan::TlsContext* const context = []() -> wan::TlsContext* {
    try {
      const wan::TlsSettings settings = detail::tls_settings();
      if (!settings.on) return nullptr;
      auto* c = new wan::TlsContext(settings, plugin_secret());  // kept for the process, as NCCL's threads may outlive statics
      log::info("striped connections between regions run in %s", c->describe().c_str());
      return c;
    } catch (const InvalidArgument& e) {
      throw NetError(abi::invalid_usage, e.what());
    }
  }();
  return context ? context->get().native_handle() : nullptr;
}

}  // namespace strata::nccl_net
