#include "wan/wan_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/config.hpp"

namespace strata::wan {

WanOptions wan_options_from_config() {
  WanOptions o;
  o.emulation = parse_emulation(config::get(config::wan_emulate));
  o.stripe_bytes = static_cast<std::size_t>(config::get(config::wan_stripe_bytes));
  o.socket_buffer = static_cast<int>(config::get(config::wan_socket_buffer));
  o.keepalive = std::chrono::milliseconds(static_cast<std::int64_t>(config::get(config::keepalive_s) * 1000));
  const std::int64_t streams = config::get(config::wan_streams);
  const std::int64_t bdp = config::get(config::wan_bdp_bytes);
  if (streams > 0) {
    o.streams = static_cast<int>(streams);
  } else if (bdp > 0) {
    // One stream carries at most its window per round trip: enough streams to fill the path.
    const double per_stream = o.emulation.window ? double(o.emulation.window) : double(o.socket_buffer);
    o.streams = static_cast<int>(std::clamp(std::ceil(double(bdp) / per_stream), 1.0, 16.0));
  } else {
    o.streams = 4;
  }
  o.unexpected_bytes = static_cast<std::size_t>(config::get(config::unexpected_bytes));
  o.send_buffer = static_cast<std::size_t>(config::get(config::wan_send_buffer));
  const double timeout_s = config::get(config::timeout_s);
  o.reconnect_for = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  o.tls = TlsSettings::from_config();
  return o;
}

}  // namespace strata::wan
