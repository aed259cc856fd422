#include <cmath>
#include <limits>

#include "transport/address_exchange.hpp"
#include "core/config.hpp"
#include "strata/errors.hpp"
#include "transport/factory.hpp"
#include "wan/wan_transport.hpp"

namespace strata::wan {

namespace {

std::int64_t positive(const char* name, const char* env, std::int64_t lo, std::int64_t hi) {
  const std::int64_t v = config::get_int(name);
  if (v < lo || v > hi)
    throw InvalidArgument(std::string(env) + "=" + std::to_string(v) + " is outside [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

}  // namespace

WanOptions wan_options_from_config() {
  WanOptions o;
  o.emulation = parse_emulation(config::get_string("wan_emulate"));
  o.stripe_bytes = static_cast<std::size_t>(
      positive("wan_stripe_bytes", "STRATA_WAN_STRIPE_BYTES", 4096, 64 << 20));
  o.socket_buffer = static_cast<int>(
      positive("wan_socket_buffer", "STRATA_WAN_SOCKET_BUFFER", 64 << 10, 1 << 30));
  const std::int64_t streams = positive("wan_streams", "STRATA_WAN_STREAMS", 0, kMaxStreams);
  const std::int64_t bdp = positive("wan_bdp_bytes", "STRATA_WAN_BDP_BYTES", 0, std::int64_t{1} << 40);
  if (streams > 0) {
    o.streams = static_cast<int>(streams);
  } else if (bdp > 0) {
    // One stream carries at most its window per round trip: enough streams to fill the path.
    const double per_stream = o.emulation.window ? double(o.emulation.window) : double(o.socket_buffer);
    o.streams = static_cast<int>(std::clamp(std::ceil(double(bdp) / per_stream), 1.0, 16.0));
  } else {
    o.streams = 4;
  }
  o.unexpected_bytes = static_cast<std::size_t>(
      positive("unexpected_bytes", "STRATA_UNEXPECTED_BYTES", 0, std::numeric_limits<std::int64_t>::max()));
  const double timeout_s = config::get_real("timeout_s");
  o.reconnect_for = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  return o;
}

std::unique_ptr<transport::Transport> make_wan_transport(int rank, int size,
                                                         bootstrap::Store& store,
                                                         Clock::time_point deadline,
                                                         const WanOptions& options) {
  auto t = std::make_unique<WanTransport>(rank, size, transport::listen_host(store), options);
  t->set_peer_addresses(
      transport::exchange_addresses(store, "wan", rank, size, t->address(), deadline));
  return t;
}

}  // namespace strata::wan

namespace strata::transport {

std::unique_ptr<Transport> make_wan_transport(int rank, int size, bootstrap::Store& store,
                                              Clock::time_point deadline) {
  return wan::make_wan_transport(rank, size, store, deadline, wan::wan_options_from_config());
}

}  // namespace strata::transport
