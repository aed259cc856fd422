// UCX's TCP transport listens on ports of its own; a job that names its ports
// (STRATA_PORT_RANGE) hands them the same range, unless the user set UCX_TCP_PORT_RANGE.
// Through the environment, before ucp_config_read: UCX 1.13 accepts the same setting by
// ucp_config_modify and then refuses it at worker creation ("invalid configuration").
// Header-only: the NCCL plugin, which compiles its UCX path in without libstrata, uses it
// too.
#pragma once

#include <cstdlib>
#include <string>

#include "base/listener.hpp"

namespace strata::transport {

// Call before ucp_config_read. Leaves a UCX_TCP_PORT_RANGE already set alone.
inline void limit_ucx_tcp_ports(const net::PortRange& ports) {
  if (ports.any()) return;
  const std::string range = std::to_string(ports.lo) + "-" + std::to_string(ports.hi);
  ::setenv("UCX_TCP_PORT_RANGE", range.c_str(), 0);
}

}  // namespace strata::transport
