#include "transport/transport.hpp"

namespace strata::transport {

const LinkReport& Transport::report() const {
  static const LinkReport nothing_to_tell;
  return nothing_to_tell;
}

}  // namespace strata::transport
