#include "core/link_settings.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/config.hpp"
#include "strata/errors.hpp"

namespace strata::detail {

wan::TlsSettings tls_settings() {
  wan::TlsSettings s;
  s.on = config::get(config::wan_tls) != 0;
  s.cert = config::get(config::tls_cert);
  s.key = config::get(config::tls_key);
  s.ca = config::get(config::tls_ca);
  const int given = !s.cert.empty() + !s.key.empty() + !s.ca.empty();
  if (given != 0 && given != 3)
    throw InvalidArgument("STRATA_TLS_CERT, STRATA_TLS_KEY and STRATA_TLS_CA go together: set all three, or none "
                          "(the job's secret then keys TLS)");
  return s;
}

std::optional<bootstrap::JobSecret> configured_secret() {
  const std::string text = config::get(config::job_secret);
  if (!text.empty()) return bootstrap::JobSecret::from_text(text);
  const std::string path = config::get(config::job_secret_file);
  if (path.empty()) return std::nullopt;
  return bootstrap::JobSecret::from_file(path, "STRATA_JOB_SECRET_FILE");
}

net::SocketSettings socket_settings() {
  net::SocketSettings s;
  s.ifaddr = config::get(config::socket_ifaddr);
  s.bind_any = config::get(config::socket_bind_any) != 0;
  s.handshake = std::chrono::milliseconds(std::llround(config::get(config::handshake_s) * 1000.0));
  s.keepalive = std::chrono::milliseconds(std::llround(config::get(config::keepalive_s) * 1000.0));
  s.ports = net::parse_port_range(config::get(config::port_range));
  s.advertise = net::checked_advertise(config::get(config::advertise_addr));
  return s;
}

wan::WanOptions wan_options() {
  wan::WanOptions o;
  o.sockets = socket_settings();
  o.emulation = wan::parse_emulation(config::get(config::wan_emulate));
  o.stripe_bytes = static_cast<std::size_t>(config::get(config::wan_stripe_bytes));
  o.tuning.buffer = static_cast<int>(config::get(config::wan_socket_buffer));
  o.tuning.congestion = config::get(config::wan_congestion);
  o.tuning.rto_min = std::chrono::microseconds(std::llround(config::get(config::wan_rto_min_ms) * 1000.0));
  o.keepalive = o.sockets.keepalive;
  const std::int64_t streams = config::get(config::wan_streams);
  const std::int64_t bdp = config::get(config::wan_bdp_bytes);
  // At least two from the path's BDP: a stream in loss recovery must leave another for the
  // stripes (one stream at 1% loss across 50 ms: 1.83-1.93x the bound, two: 1.13-1.31x).
  // Four when nothing is known, of which a peer's bytes use two once those carry 250 Mbit/s:
  // which count is best depends on the rate (BENCHMARKS.md, 2026-12-04; why in
  // wan/wan_path.cpp's choose_bulk_width). A count asked for is kept whatever the rate.
  if (streams > 0) {
    o.streams = static_cast<int>(streams);
  } else if (bdp > 0) {
    // One stream carries at most its window per round trip: enough streams to fill the path.
    // Autotuning lets a stream's receive buffer grow to tcp_rmem's third field, of which
    // about half is window.
    const double per_stream = o.emulation.window ? double(o.emulation.window)
                              : o.tuning.buffer  ? double(o.tuning.buffer)
                                                 : std::max(1.0, double(net::autotune_receive_max()) / 2);
    o.streams = static_cast<int>(std::clamp(std::ceil(double(bdp) / per_stream), 2.0, 16.0));
  } else {
    o.streams = 4;
    o.narrow_streams = 2;
    o.narrow_above = 250e6 / 8;
  }
  o.latency_streams = static_cast<int>(config::get(config::wan_latency_streams));
  o.unexpected_bytes = static_cast<std::size_t>(config::get(config::unexpected_bytes));
  o.send_buffer = static_cast<std::size_t>(config::get(config::wan_send_buffer));
  const double timeout_s = config::get(config::timeout_s);
  o.reconnect_for = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  o.tls = tls_settings();
  return o;
}

}  // namespace strata::detail
