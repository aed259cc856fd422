// Creates the transport a communicator asked for inside a region (the link between
// regions is wan/wan_transport.hpp's). Each implementation publishes its
// address under "<name>/<rank>" in the store and reads everyone else's.
#pragma once

#include <memory>

#include "bootstrap/job_secret.hpp"
#include "bootstrap/store.hpp"
#include "strata/options.hpp"
#include "transport/transport.hpp"

namespace strata::transport {

// The TCP transport admits only connections that prove they know `secret`.
std::unique_ptr<Transport> make_tcp_transport(int rank, int size, bootstrap::Store& store,
                                              Clock::time_point deadline, const bootstrap::JobSecret& secret);
std::unique_ptr<Transport> make_ucx_transport(int rank, int size, bootstrap::Store& store,
                                              Clock::time_point deadline);

inline std::unique_ptr<Transport> make_transport(TransportKind kind, int rank, int size,
                                                 bootstrap::Store& store, Clock::time_point deadline,
                                                 const bootstrap::JobSecret& secret) {
  return kind == TransportKind::tcp ? make_tcp_transport(rank, size, store, deadline, secret)
                                    : make_ucx_transport(rank, size, store, deadline);
}

}  // namespace strata::transport
