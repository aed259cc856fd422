#include "base/accept_loop.hpp"

namespace strata::net {

boost::asio::ip::address bind_address(const boost::asio::ip::address& published, bool any) {
  if (!any) return published;
  if (published.is_v6()) return boost::asio::ip::address_v6::any();
  return boost::asio::ip::address_v4::any();
}

}  // namespace strata::net
