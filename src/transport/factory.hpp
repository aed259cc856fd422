// Creates the transport a communicator asked for inside a region (the link between
// regions is wan/wan_transport.hpp's). Each implementation publishes its
// address under "<name>/<rank>" in the store and reads everyone else's.
#pragma once

#include <memory>

#include "base/socket_settings.hpp"
#include "bootstrap/job_secret.hpp"
#include "bootstrap/store.hpp"
#include "strata/options.hpp"
#include "transport/transport.hpp"

namespace strata::transport {

// What the communicator's settings say of the fabric inside a region (core resolves them).
struct FabricSettings {
  std::size_t unexpected_bytes = std::size_t{1} << 30;  // STRATA_UNEXPECTED_BYTES (TCP)
  bool shared_memory = true;                            // STRATA_SHARED_MEMORY
  net::SocketSettings sockets;
  // This process's region (STRATA_REGION): the TCP transport publishes its advertised
  // address beside its own, and dials a peer in another region at its advertised one.
  std::string region;
};

// The fabrics alone (make_transport adds the host's segment). The TCP transport admits
// only connections that prove they know `secret`.
std::unique_ptr<Transport> make_tcp_transport(int rank, int size, bootstrap::Store& store,
                                              Clock::time_point deadline, const bootstrap::JobSecret& secret,
                                              const FabricSettings& settings);
// UCX's own TCP transport listens in `ports` too, unless UCX_TCP_PORT_RANGE says otherwise.
std::unique_ptr<Transport> make_ucx_transport(int rank, int size, bootstrap::Store& store,
                                              Clock::time_point deadline, const net::PortRange& ports = {});

// The transport of `kind`, with the host's shared segment (host_segment.hpp) agreed
// among the ranks of this machine: built here, the same way whichever fabric joins them.
std::unique_ptr<Transport> make_transport(TransportKind kind, int rank, int size, bootstrap::Store& store,
                                          Clock::time_point deadline, const bootstrap::JobSecret& secret,
                                          const FabricSettings& settings);

}  // namespace strata::transport
