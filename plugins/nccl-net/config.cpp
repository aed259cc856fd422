#include "config.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "errors.hpp"
#include "log.hpp"

namespace strata::nccl_net {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Unset or empty: `fallback`. Otherwise a whole decimal integer within [lo, hi].
long long env_int(const char* name, long long fallback, long long lo, long long hi) {
  const std::string v = env(name);
  if (v.empty()) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (errno != 0 || end == v.c_str() || *end != '\0' || x < lo || x > hi)
    throw NetError(abi::invalid_usage, std::string(name) + "=" + v + " is not an integer in [" +
                                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

}  // namespace

Config read_config() {
  Config c;
  c.region = env("STRATA_REGION");
  c.interfaces = env("STRATA_NET_IF");
  c.emulation = wan::parse_emulation(env("STRATA_WAN_EMULATE"));
  if (c.emulation.rate_bytes_per_s > 0 || c.emulation.loss > 0 || c.emulation.corrupt > 0 ||
      c.emulation.cut_after > 0)
    log::warn("STRATA_WAN_EMULATE: the plugin emulates only delay and window; "
              "rate, loss, corrupt and cut are ignored");
  c.stripe_bytes = static_cast<std::size_t>(env_int("STRATA_WAN_STRIPE_BYTES", 512 << 10, 4096, 64 << 20));
  c.socket_buffer = static_cast<int>(env_int("STRATA_WAN_SOCKET_BUFFER", 8 << 20, 64 << 10, 1 << 30));
  const long long streams = env_int("STRATA_WAN_STREAMS", 0, 0, 64);
  const long long bdp = env_int("STRATA_WAN_BDP_BYTES", 0, 0, 1ll << 40);
  if (streams > 0) {
    c.wan_streams = static_cast<int>(streams);
  } else if (bdp > 0) {
    // As in libstrata: one stream carries at most its window per round trip.
    const double per_stream =
        c.emulation.window ? double(c.emulation.window) : double(c.socket_buffer);
    c.wan_streams = static_cast<int>(std::clamp(std::ceil(double(bdp) / per_stream), 1.0, 16.0));
  }
  c.speed_mbps = static_cast<int>(env_int("STRATA_NET_SPEED_MBPS", 0, 0, 100'000'000));
  c.latency_us = static_cast<int>(env_int("STRATA_NET_LATENCY_US", -1, 0, 10'000'000));
  c.connect_timeout = std::chrono::seconds(env_int("STRATA_NET_CONNECT_TIMEOUT_S", 120, 1, 86400));
  const std::string intra = env("STRATA_NET_INTRA");
  if (intra == "tcp")
    c.intra = IntraPath::tcp;
  else if (!intra.empty() && intra != "ucx")
    throw NetError(abi::invalid_usage, "STRATA_NET_INTRA=" + intra + " is neither ucx nor tcp");
  return c;
}

}  // namespace strata::nccl_net
