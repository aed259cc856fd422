// The plugin's settings, read from the environment once, at the first init, through
// libstrata's own registry (core/settings.def: names, defaults and ranges) and its WAN
// options (wan/wan_options.hpp), compiled into the plugin: one environment configures
// both alike.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "base/listener.hpp"
#include "base/tcp_path.hpp"
#include "wan/emulation.hpp"

namespace strata::nccl_net {

// How a connection to a peer in the same region carries data (STRATA_NET_INTRA).
enum class IntraPath {
  ucx,  // UCX tag messages: shared memory on one host, RDMA or TCP between hosts
  tcp,  // one plugin-framed TCP stream: the fallback, and the baseline to compare with
};

struct Config {
  std::string region;           // STRATA_REGION: peers in other regions get the striped path
  std::string interfaces;       // STRATA_NET_IF: comma-separated name prefixes ("" = auto)
  // STRATA_WAN_STREAMS (0: from STRATA_WAN_BDP_BYTES, at least 2, else 4). Every stream
  // dialled carries stripes: the WAN link's narrowing to two is not applied here, where
  // NCCL's channels already open several connections per peer.
  int wan_streams = 4;
  std::size_t stripe_bytes = 512u << 10;  // STRATA_WAN_STRIPE_BYTES
  net::PathTuning tuning;       // STRATA_WAN_CONGESTION, _RTO_MIN_MS, _SOCKET_BUFFER: WAN streams only
  wan::Emulation emulation;     // STRATA_WAN_EMULATE: delay, window and cut are honoured
  std::chrono::milliseconds reconnect_for{60000};  // as the WAN link: STRATA_TIMEOUT_S
  int speed_mbps = 0;           // STRATA_NET_SPEED_MBPS: overrides sysfs (0: not set)
  int latency_us = -1;          // STRATA_NET_LATENCY_US (-1: not set)
  std::chrono::seconds connect_timeout{120};  // STRATA_NET_CONNECT_TIMEOUT_S, accept's handshake too
  IntraPath intra = IntraPath::ucx;           // STRATA_NET_INTRA=ucx|tcp
  net::PortRange ports;                       // STRATA_PORT_RANGE: listen and rejoin ports
  std::string advertise;                      // STRATA_ADVERTISE_ADDR: in the handle, for other regions
  std::chrono::milliseconds keepalive{15000};  // STRATA_KEEPALIVE_S: every stream's idle probes
  std::chrono::milliseconds stall{5000};       // as the WAN link's: unacknowledged bytes end a stream
};

// Throws NetError(invalid_usage) naming a malformed variable.
Config read_config();

}  // namespace strata::nccl_net
