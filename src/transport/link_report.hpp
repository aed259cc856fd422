// Beside the seam: what a transport can tell of its link without taking part in moving
// messages. The cost model and the pipelining read its profile once, when a communicator
// is made; users and tests read its traffic; timeout messages add its trouble. Algorithms
// never need it, so it is not part of Transport's interface (transport.hpp): a transport
// hands it out through Transport::report().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::transport {

// Figures of the link that stay as they are for the transport's life.
struct LinkProfile {
  // The pipeline chunk collectives cut long vectors into when STRATA_CHUNK_BYTES does not
  // say: where each message costs a handshake, fewer and larger ones win.
  std::size_t chunk_bytes = std::size_t{1} << 20;
  // How late, on average, a waiting rank notices a message because of how it sleeps
  // rather than the link: the cost model adds it to every round (wan::RoutedTransport
  // sleeps in turns on two fabrics). Spinning probes do not see it.
  std::chrono::microseconds wait_latency{0};
};

// Bytes this rank moved over the inter-region (WAN) link since the transport was
// created. Payload counts message bytes as algorithms see them, so it can be checked
// against an algorithm's expected traffic; wire adds what the link itself costs (frame
// headers, acknowledgements, resends after a broken stream), the figure a WAN bill or a
// shaped link sees. Transports that never cross a region report zeros.
struct TrafficCounters {
  std::uint64_t wan_payload_sent = 0;      // message bytes handed to the WAN link by isend
  std::uint64_t wan_wire_sent = 0;         // bytes written to WAN sockets, all overhead included
  std::uint64_t wan_payload_received = 0;  // message bytes the link delivered, each once
  std::uint64_t wan_resent = 0;            // payload bytes written again after a stream broke
};

// What a link that crosses regions has measured of its path, from its streams' kernels:
// for how much a pipeline keeps in flight, and for people (logs, strata-plan). Of the
// peer whose path holds the most bytes in flight; zeros where nothing is known yet.
struct PathFigures {
  double rtt_s = 0;             // the shortest round trip seen: the path without its queue
  double srtt_s = 0;            // the smoothed one: what a message meets, queue included
  double rate_bytes_per_s = 0;  // delivery rate while not idle, the best of the last 10 s
  double loss = 0;              // retransmitted over sent segments since the streams began
  int streams = 0;              // streams that carried data in that time
  double bdp_bytes() const { return rtt_s * rate_bytes_per_s; }
};

class LinkReport {
 public:
  virtual ~LinkReport() = default;
  virtual LinkProfile profile() const { return {}; }
  // Thread-safe.
  virtual PathFigures path() const { return {}; }
  // Thread-safe (any thread may read while the engine runs).
  virtual TrafficCounters traffic() const { return {}; }
  // Engine thread. What the transport could not do on its own and may explain a peer's
  // silence (its listener ran out of file descriptors), for timeout messages; "" if none.
  virtual std::string trouble() const { return ""; }
};

}  // namespace strata::transport
