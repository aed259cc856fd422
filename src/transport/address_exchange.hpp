// How socket-based transports find each other: listen on an address peers can reach,
// publish it in the store, read everyone else's.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "transport/transport.hpp"

namespace strata::transport {

// `configured` (STRATA_SOCKET_IFADDR) if set, else the local address of the connection
// to the rendezvous store (the interface that reaches the root) or of the control mesh
// that stands in for it, else loopback.
std::string listen_host(bootstrap::Store& store, const std::string& configured);

// Publishes `mine` under "<kind>/<rank>" and returns every rank's address, by rank.
std::vector<std::string> exchange_addresses(bootstrap::Store& store, const std::string& kind,
                                            int rank, int size, const std::string& mine,
                                            Clock::time_point deadline);

}  // namespace strata::transport
