// The WAN link's settings resolved from the registry (STRATA_WAN_*, STRATA_TLS_*,
// STRATA_KEEPALIVE_S, STRATA_UNEXPECTED_BYTES, STRATA_TIMEOUT_S) into the values wan/
// takes: the one place both libstrata's link and the NCCL plugin (which compiles this
// file in) derive them, so one environment configures both alike. wan/ reads no setting.
#pragma once

#include "wan/tls.hpp"
#include "wan/wan_options.hpp"

namespace strata::detail {

// Throws InvalidArgument naming a bad variable; the secret is the caller's to set.
wan::WanOptions wan_options();
// STRATA_WAN_TLS and STRATA_TLS_CERT/_KEY/_CA (all three or none).
wan::TlsSettings tls_settings();

}  // namespace strata::detail
