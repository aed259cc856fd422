// The plugin's settings, read from the environment once, at the first init. The WAN
// variables mean what they mean for libstrata (same names, same defaults), so one
// environment configures both; the plugin never links strata's core config registry.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "wan/emulation.hpp"

namespace strata::nccl_net {

struct Config {
  std::string region;           // STRATA_REGION: peers in other regions get the striped path
  std::string interfaces;       // STRATA_NET_IF: comma-separated name prefixes ("" = auto)
  int wan_streams = 4;          // STRATA_WAN_STREAMS (0: from STRATA_WAN_BDP_BYTES, else 4)
  std::size_t stripe_bytes = 512u << 10;  // STRATA_WAN_STRIPE_BYTES
  int socket_buffer = 8 << 20;  // STRATA_WAN_SOCKET_BUFFER, WAN streams only
  wan::Emulation emulation;     // STRATA_WAN_EMULATE: delay and window are honoured
  int speed_mbps = 0;           // STRATA_NET_SPEED_MBPS: overrides sysfs (0: not set)
  int latency_us = -1;          // STRATA_NET_LATENCY_US (-1: not set)
  std::chrono::seconds connect_timeout{120};  // STRATA_NET_CONNECT_TIMEOUT_S
};

// Throws NetError(invalid_usage) naming a malformed variable.
Config read_config();

}  // namespace strata::nccl_net
