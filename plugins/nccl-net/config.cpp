#include "config.hpp"

#include "core/config.hpp"
#include "errors.hpp"
#include "log.hpp"
#include "strata/errors.hpp"
#include "core/link_settings.hpp"

namespace strata::nccl_net {

Config read_config() {
  try {
    Config c;
    c.region = config::get(config::region);
    c.interfaces = config::get(config::net_if);
    const wan::WanOptions wan = detail::wan_options();
    c.emulation = wan.emulation;
    if (c.emulation.rate_bytes_per_s > 0 || c.emulation.loss > 0 || c.emulation.corrupt > 0)
      log::warn("STRATA_WAN_EMULATE: the plugin emulates only delay, window and cut; "
                "rate, loss and corrupt are ignored");
    c.reconnect_for = wan.reconnect_for;
    c.stripe_bytes = wan.stripe_bytes;
    c.tuning = wan.tuning;
    c.wan_streams = wan.streams;
    c.ports = wan.sockets.ports;
    c.advertise = wan.sockets.advertise;
    c.keepalive = wan.keepalive;
    c.stall = wan.stall;
    c.speed_mbps = static_cast<int>(config::get(config::net_speed_mbps));
    c.latency_us = static_cast<int>(config::get(config::net_latency_us));
    c.connect_timeout = std::chrono::seconds(config::get(config::net_connect_timeout_s));
    c.intra = config::get(config::net_intra) == "tcp" ? IntraPath::tcp : IntraPath::ucx;
    return c;
  } catch (const InvalidArgument& e) {
    throw NetError(abi::invalid_usage, e.what());
  }
}

}  // namespace strata::nccl_net
