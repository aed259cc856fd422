// The settings of a process's links resolved from the registry (STRATA_JOB_SECRET*,
// STRATA_SOCKET_*, STRATA_HANDSHAKE_S, STRATA_KEEPALIVE_S, STRATA_WAN_*, STRATA_TLS_*,
// STRATA_UNEXPECTED_BYTES, STRATA_TIMEOUT_S) into the values bootstrap/, transport/ and
// wan/ take: the one place both libstrata and the NCCL plugin (which compiles this file
// in) derive them, so one environment configures both alike. No layer below reads one.
#pragma once

#include <optional>

#include "base/socket_settings.hpp"
#include "bootstrap/job_secret.hpp"
#include "wan/tls.hpp"
#include "wan/wan_options.hpp"

namespace strata::detail {

// STRATA_JOB_SECRET, else the contents of STRATA_JOB_SECRET_FILE, else nothing.
// Throws InvalidArgument when the file cannot be read or is empty.
std::optional<bootstrap::JobSecret> configured_secret();
// STRATA_SOCKET_IFADDR, STRATA_SOCKET_BIND_ANY, STRATA_HANDSHAKE_S, STRATA_KEEPALIVE_S:
// what every listener and dialer of a process is given (the WAN link's among them).
net::SocketSettings socket_settings();
// Throws InvalidArgument naming a bad variable; the secret is the caller's to set.
wan::WanOptions wan_options();
// STRATA_WAN_TLS and STRATA_TLS_CERT/_KEY/_CA (all three or none).
wan::TlsSettings tls_settings();

}  // namespace strata::detail
