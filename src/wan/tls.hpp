// TLS 1.3 for the WAN link (STRATA_WAN_TLS=1), on Asio's SSL streams over OpenSSL. Both
// ends authenticate each other: by certificates signed by STRATA_TLS_CA when
// STRATA_TLS_CERT/_KEY/_CA are given, else by the job's secret as a pre-shared key, so a
// job needs no certificates to keep its gradients private between regions.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ssl.hpp>

#include "bootstrap/job_secret.hpp"

namespace strata::wan {

struct TlsSettings {
  bool on = false;
  std::string cert, key, ca;  // PEM files; all three, or none (the job's secret keys TLS)
  bool certificates() const { return !cert.empty(); }
};

// One context for both roles (a rank dials and accepts). Throws InvalidArgument naming
// the setting whose file cannot be used.
class TlsContext {
 public:
  TlsContext(const TlsSettings& settings, const bootstrap::JobSecret& secret);
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  boost::asio::ssl::context& get() { return ctx_; }
  // "TLS 1.3, certificates" / "TLS 1.3, the job's secret (PSK)", for logs.
  std::string describe() const;

 private:
  boost::asio::ssl::context ctx_;
  bootstrap::JobSecret secret_;
  bool certificates_;
};

}  // namespace strata::wan
