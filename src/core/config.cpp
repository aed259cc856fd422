#include "core/config.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "strata/errors.hpp"

namespace strata::config {

const std::vector<Setting>& registry() {
  static const std::vector<Setting> settings = {
      {"timeout_s", "STRATA_TIMEOUT_S", Type::real, "300",
       "Deadline in seconds for bootstrap and for each collective; on expiry the error names "
       "the ranks that did not answer."},
      {"servers", "STRATA_SERVERS", Type::integer, "0",
       "Dedicated parameter-server processes (started with STRATA_ROLE=server) that workers push to; "
       "every worker and server must agree."},
      {"role", "STRATA_ROLE", Type::string, "worker",
       "worker, or server: Communicator::from_env serves as a dedicated parameter server and exits."},
      {"algo", "STRATA_ALGO", Type::string, "auto",
       "Plan: auto (hierarchical when the ranks span several regions: split rail on a "
       "uniform layout, leaders otherwise; else flat), hier, or flat."},
      {"compress", "STRATA_COMPRESS", Type::string, "none",
       "Compression of every allreduce that does not set its own (CallOptions::compression), "
       "e.g. topk:0.01+int8; lossy, so off by default. Applies to the cross-region stage."},
      {"topo_file", "STRATA_TOPO_FILE", Type::string, "",
       "Topology file (protobuf text format) whose placements override STRATA_REGION, "
       "_CLUSTER, _RACK and _HOST; see bench/topologies/."},
      {"wan_link", "STRATA_WAN_LINK", Type::integer, "1",
       "1: peers in other regions are reached over the striped WAN link (src/wan); 0: over "
       "the intra-region transport like everyone else."},
      {"transport", "STRATA_TRANSPORT", Type::string, "ucx",
       "Point-to-point fabric: ucx (shared memory, RDMA, TCP as UCX picks) or tcp."},
      {"debug", "STRATA_DEBUG", Type::string, "WARN", "Log level: ERROR, WARN, INFO, TRACE."},
      {"chunk_bytes", "STRATA_CHUNK_BYTES", Type::integer, "1048576",
       "Pipeline chunk of ring algorithms: a ring step forwards a chunk as soon as it is "
       "reduced, so smaller chunks overlap more and cost more messages."},
      {"small_bytes", "STRATA_SMALL_BYTES", Type::integer, "65536",
       "Up to this many bytes, split-rail plans run a whole allreduce (or broadcast) per "
       "level instead of their pipeline; without a communicator's selector, also the size "
       "below which log(p)-step algorithms replace the ring."},
      {"probe", "STRATA_PROBE", Type::integer, "1",
       "1: at creation, one pair of ranks per link class (same host, hosts of a region, each "
       "pair of regions) ping-pongs 8 B and 1 MiB, and fans 8 B out to its hosts' other ranks, "
       "measuring latency, bandwidth and per-message gap for the cost model; 0: built-in "
       "figures (and the topology file's)."},
      {"probe_ms", "STRATA_PROBE_MS", Type::integer, "200",
       "Time budget in milliseconds of link probing, shared by all probed pairs; a slow link "
       "gets fewer round trips, and no large one when the small ones used half its share."},
      {"probe_cache_s", "STRATA_PROBE_CACHE_S", Type::integer, "3600",
       "Rank 0 keeps probed figures in $XDG_CACHE_HOME/strata (else /tmp/strata-cache-UID), "
       "keyed by the ranks' places and the fabric; younger than this many seconds, they are "
       "reused instead of probing again. 0: always probe."},
      {"segment_bytes", "STRATA_SEGMENT_BYTES", Type::integer, "4194304",
       "Segment of the hierarchical allreduce's pipeline: while one segment crosses the "
       "WAN the next is reduced inside the region. Smaller starts the WAN sooner."},
      {"socket_ifaddr", "STRATA_SOCKET_IFADDR", Type::string, "",
       "Address the TCP transport listens on; default: the local address that reaches the "
       "rendezvous root."},
      {"spin_us", "STRATA_SPIN_US", Type::integer, "50",
       "How long a waiting thread polls (yielding in between) before it sleeps in the "
       "kernel. Measured on 2 cores with 4 ranks, yielding spins still beat sleeping at "
       "once, so the default spins even when ranks outnumber cores."},
      {"unexpected_bytes", "STRATA_UNEXPECTED_BYTES", Type::integer, "1073741824",
       "Memory a rank may hold for messages that arrived before their receive was posted (TCP "
       "transport and WAN link). A message that does not fit waits unread on its connection "
       "until its receive is posted, so nothing a peer (or anything that connects) claims "
       "in a length prefix is allocated beyond this."},
      {"wan_streams", "STRATA_WAN_STREAMS", Type::integer, "0",
       "Parallel TCP streams per peer pair on the WAN link; 0 derives it from "
       "STRATA_WAN_BDP_BYTES (enough streams to fill the path), else 4."},
      {"wan_bdp_bytes", "STRATA_WAN_BDP_BYTES", Type::integer, "0",
       "Bandwidth-delay product of the WAN path in bytes (0: unknown); sizes the default "
       "stream count, since one stream moves at most its window per round trip."},
      {"wan_stripe_bytes", "STRATA_WAN_STRIPE_BYTES", Type::integer, "524288",
       "Stripe size of the WAN link: messages are cut into stripes, each sent on the stream "
       "with the fewest unacknowledged bytes."},
      {"wan_socket_buffer", "STRATA_WAN_SOCKET_BUFFER", Type::integer, "8388608",
       "SO_SNDBUF/SO_RCVBUF of WAN streams; a long fat path needs buffers near its BDP."},
      {"wan_emulate", "STRATA_WAN_EMULATE", Type::string, "",
       "In-process WAN emulation, e.g. rate=200mbit,delay=25ms,window=4m,loss=0.001 (token "
       "bucket per peer, one-way delay, unacknowledged bytes per stream, probability per "
       "frame of dropping the stream)."},
  };
  return settings;
}

namespace {

const Setting& find(const char* name) {
  for (const auto& s : registry())
    if (std::strcmp(s.name, name) == 0) return s;
  throw std::logic_error(std::string("unknown strata setting ") + name);
}

std::string raw(const Setting& s) {
  const char* v = std::getenv(s.env);
  return v && *v ? std::string(v) : std::string(s.default_value);
}

}  // namespace

std::int64_t get_int(const char* name) {
  const auto& s = find(name);
  const std::string v = raw(s);
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0')
    throw InvalidArgument(std::string(s.env) + "='" + v + "' is not an integer");
  return x;
}

double get_real(const char* name) {
  const auto& s = find(name);
  const std::string v = raw(s);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0')
    throw InvalidArgument(std::string(s.env) + "='" + v + "' is not a number");
  return x;
}

std::string get_string(const char* name) { return raw(find(name)); }

std::string dump() {
  std::string out;
  for (const auto& s : registry()) {
    const char* v = std::getenv(s.env);
    out += std::string(s.env) + "=" + raw(s) + (v && *v ? "" : " (default)") + "\n";
  }
  return out;
}

}  // namespace strata::config
