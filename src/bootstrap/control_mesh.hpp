// The control mesh: TCP connections between a communicator's ranks, apart from the
// transport that carries data and served by a thread of its own, as NCCL's bootstrap
// network is. Small jobs connect every pair; larger ones (beyond STRATA_MESH_FULL_UPTO
// ranks) connect each rank to O(log N) others (bootstrap/mesh_overlay.hpp) and flood what
// is meant for ranks a rank holds no connection with. It answers what the data path
// cannot answer quickly:
//
//  - Is a peer's process still there? A connection that ends is not taken for a death by
//    itself: a middlebox that forgot an idle flow, or a reset by hand, ends connections of
//    processes that live. The rank that dialled the pair dials again (the job's handshake
//    again) and the other probes the peer's control port meanwhile; a host that refuses
//    that connection has no process listening there any more (it exited or was killed),
//    which is known within a round trip. A peer that cannot be reached again within the
//    heartbeat period (10 s without heartbeats) is lost too.
//  - Is it frozen? With a heartbeat period, each rank beats to its two ring neighbours
//    four times a period and declares a neighbour that stays silent a whole period lost;
//    after half a period of silence it drops the connection and dials again, in case the
//    connection rather than the peer stalled. Only neighbours beat, so the cost per rank
//    does not grow with the job, across a WAN included.
//  - Does everyone hear of a failure? A notice (a lost rank, a mismatch, a timeout) sent
//    by one rank reaches every other: directly, or flooded along the overlay, every rank
//    passing it on the first time it sees it (at most ⌊log2 N⌋ hops). Notices and
//    key-value puts are numbered and resent after a reconnection (mesh_link.hpp), so a
//    connection that broke under one loses nothing.
//  - Keepalive: an idle connection gets the kernel's keepalive probes and, every
//    STRATA_KEEPALIVE_S without traffic, a beat of the mesh's own, so that NAT tables and
//    firewalls that track only data do not forget it.
//
// It outlives an aborted data transport, so survivors can still talk to each other: it
// carries their rendezvous when they shrink (put/wait below), so no store is needed.
// Frames are store_protocol.hpp's (a 4-byte length, then a ControlMessage), at most
// kMaxControlFrame bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/listener.hpp"
#include "bootstrap/job_secret.hpp"
#include "bootstrap/store.hpp"

namespace strata::bootstrap {

inline constexpr std::size_t kMaxControlFrame = 1u << 20;
// What peers may leave in this rank's key-value table, all together.
inline constexpr std::size_t kMaxControlTable = 64u << 20;

// A failure one rank reports to all.
struct ControlNotice {
  int from = -1;          // the reporting rank
  int code = 0;           // strata::ErrorCode
  std::uint64_t seq = 0;  // the collective it ended, when one was running
  std::vector<int> lost;  // ranks found lost (code peer_lost)
  std::string text;
};

// How often the mesh checks on peers; zero turns the check off.
struct MeshTiming {
  std::chrono::milliseconds heartbeat{0};  // STRATA_HEARTBEAT_S: the silence after which a neighbour is lost
  std::chrono::milliseconds keepalive{0};  // STRATA_KEEPALIVE_S: the idle time after which a connection is probed
  std::chrono::milliseconds handshake{10000};  // STRATA_HANDSHAKE_S: for a connection to prove itself
  bool bind_any = false;                       // net::bind_address
  net::PortRange ports;                        // STRATA_PORT_RANGE
  int full_upto = 16;                          // STRATA_MESH_FULL_UPTO: every pair connected up to this size
};

class ControlMesh {
 public:
  // Called on the mesh's thread; must not block for long.
  struct Events {
    std::function<void(int rank, const std::string& why)> lost;
    std::function<void(const ControlNotice&)> notice;
  };

  // Listens on bind_host at once. Connections in both directions prove they know
  // `secret` before any frame is read.
  ControlMesh(int rank, int size, const std::string& bind_host, MeshTiming timing, const JobSecret& secret);
  ~ControlMesh();  // goodbye(), then stops
  ControlMesh(const ControlMesh&) = delete;
  ControlMesh& operator=(const ControlMesh&) = delete;

  std::string address() const;  // "ip:port" to publish
  std::string host() const;     // the "ip" of it
  // The ranks this one holds a connection with (mesh_overlay.hpp), ascending.
  const std::vector<int>& neighbours() const;
  // Dials every higher neighbour, accepts the lower ones, and returns once all are connected.
  // TimeoutError names the ranks that were not. Events start only after this returns.
  // `livenesses`: each rank's process liveness port, for confirm_dead (empty: none known).
  void connect(const std::vector<std::string>& addresses, Clock::time_point deadline, Events events,
               std::vector<std::string> livenesses = {});

  // Any thread; returns at once. Goes to every rank still reachable, whether this one holds
  // a connection with it or not.
  void broadcast(const ControlNotice& n);
  // A tiny key-value store between ranks of the mesh: put() stores the pair here and
  // sends it to `to` (any thread, returns at once; directly when this rank holds a
  // connection with each of them, else flooded); wait() blocks until every key has
  // arrived, or throws: TimeoutError at the deadline naming the missing keys, or
  // PeerLostError when one of `needed` (the ranks expected to put them) is lost meanwhile.
  void put(const std::string& key, const std::string& value, const std::vector<int>& to);
  std::vector<std::string> wait(const std::vector<std::string>& keys, Clock::time_point deadline,
                                const std::vector<int>& needed);
  // Drops keys from this rank's table (what wait() returned and nobody asks again), so
  // that exchanges at creation do not fill it.
  void forget(const std::vector<std::string>& keys);
  // Each rank's process liveness port, for confirm_dead, once known beyond the neighbours.
  void set_livenesses(std::vector<std::string> livenesses);

  // Which of `ranks` have no process any more: their host refuses a connection to their
  // process's liveness port (a control port closes also when the process went on to a
  // newer communicator). A rank that cannot be reached at all within `budget` (a
  // partition, a host down) is not among them: it may still be running. Any thread; blocks.
  std::vector<int> confirm_dead(const std::vector<int>& ranks, std::chrono::milliseconds budget);

  // Tells every peer this rank is leaving, so its connections' end is not taken for a
  // death, and waits (at most a second) for that to be written. No event is delivered
  // once it returns (one under way has finished), so the owner may then go. Idempotent.
  void goodbye();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::bootstrap
