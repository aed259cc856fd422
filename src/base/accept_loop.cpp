#include "base/accept_loop.hpp"

#include "base/config.hpp"

namespace strata::net {

boost::asio::ip::address bind_address(const boost::asio::ip::address& published) {
  if (config::get(config::socket_bind_any) == 0) return published;
  if (published.is_v6()) return boost::asio::ip::address_v6::any();
  return boost::asio::ip::address_v4::any();
}

}  // namespace strata::net
