#include "bootstrap/auth_gate.hpp"

#include <cmath>

#include "base/config.hpp"

namespace strata::bootstrap::auth {

GateLimits GateLimits::from_config() {
  GateLimits l;
  l.deadline = std::chrono::milliseconds(std::llround(config::get(config::handshake_s) * 1000.0));
  return l;
}

}  // namespace strata::bootstrap::auth
