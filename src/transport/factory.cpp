#include "transport/factory.hpp"

#include "transport/host_segment.hpp"

namespace strata::transport {

std::unique_ptr<Transport> make_transport(TransportKind kind, int rank, int size, bootstrap::Store& store,
                                          Clock::time_point deadline, const bootstrap::JobSecret& secret,
                                          const FabricSettings& settings) {
  auto t = kind == TransportKind::tcp ? make_tcp_transport(rank, size, store, deadline, secret, settings)
                                      : make_ucx_transport(rank, size, store, deadline, settings.sockets.ports);
  // Ranks of one host move collectives' data through a segment they all map; over TCP
  // only the notices that pace them go through the sockets.
  t->use_host_segment(std::make_shared<HostSegment>(rank, find_host_peers(store, "host/", rank, size, deadline),
                                                    settings.shared_memory, store, "shm/", deadline));
  return t;
}

}  // namespace strata::transport
