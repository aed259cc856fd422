#include "wan/tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstring>

#include "strata/errors.hpp"

namespace strata::wan {

namespace ssl = boost::asio::ssl;

namespace {

constexpr const char* kPskIdentity = "strata-job";

// Where a context keeps its job's secret for the PSK callbacks. Not the context's app
// data: Asio keeps its verify callback there, and deletes whatever it finds.
int secret_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

const bootstrap::JobSecret& secret_of(SSL* s) {
  return *static_cast<const bootstrap::JobSecret*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(s), secret_index()));
}

unsigned int client_psk(SSL* s, const char*, char* identity, unsigned int max_identity, unsigned char* psk,
                        unsigned int max_psk) {
  const auto& key = secret_of(s).key;
  if (std::strlen(kPskIdentity) + 1 > max_identity || key.size() > max_psk) return 0;
  std::strcpy(identity, kPskIdentity);
  std::memcpy(psk, key.data(), key.size());
  return static_cast<unsigned int>(key.size());
}

unsigned int server_psk(SSL* s, const char* identity, unsigned char* psk, unsigned int max_psk) {
  const auto& key = secret_of(s).key;
  if (!identity || std::strcmp(identity, kPskIdentity) != 0 || key.size() > max_psk) return 0;
  std::memcpy(psk, key.data(), key.size());
  return static_cast<unsigned int>(key.size());
}

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  if (!e) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

}  // namespace

TlsContext::TlsContext(const TlsSettings& settings, const bootstrap::JobSecret& secret)
    : ctx_(ssl::context::tls), secret_(secret), certificates_(settings.certificates()) {
  SSL_CTX* c = ctx_.native_handle();
  SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION);
  SSL_CTX_set_ex_data(c, secret_index(), &secret_);
  if (certificates_) {
    auto load = [&](int ok, const char* setting, const std::string& path) {
      if (ok != 1)
        throw InvalidArgument(std::string(setting) + ": cannot use '" + path + "': " + openssl_error());
    };
    load(SSL_CTX_use_certificate_chain_file(c, settings.cert.c_str()), "STRATA_TLS_CERT", settings.cert);
    load(SSL_CTX_use_PrivateKey_file(c, settings.key.c_str(), SSL_FILETYPE_PEM), "STRATA_TLS_KEY", settings.key);
    load(SSL_CTX_check_private_key(c), "STRATA_TLS_KEY", settings.key + " (does not match STRATA_TLS_CERT)");
    load(SSL_CTX_load_verify_locations(c, settings.ca.c_str(), nullptr), "STRATA_TLS_CA", settings.ca);
    // Both ends show a certificate the job's authority signed; there is no host name to
    // check (peers are addresses the rendezvous published), the authority is the trust.
    ctx_.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  } else {
    if (secret.open)
      throw InvalidArgument("STRATA_WAN_TLS=1 without certificates keys TLS by the job's secret, and this job has "
                            "none: set STRATA_JOB_SECRET (or STRATA_TLS_CERT/_KEY/_CA)");
    SSL_CTX_set_psk_client_callback(c, client_psk);
    SSL_CTX_set_psk_server_callback(c, server_psk);
    ctx_.set_verify_mode(ssl::verify_none);  // the key is the authentication
  }
}

std::string TlsContext::describe() const {
  return certificates_ ? "TLS 1.3, certificates" : "TLS 1.3, the job's secret (PSK)";
}

}  // namespace strata::wan
