// The control mesh: one TCP connection between every pair of a communicator's ranks,
// apart from the transport that carries data and served by a thread of its own, as
// NCCL's bootstrap network is. It answers what the data path cannot answer quickly:
//
//  - Is a peer's process still there? When a process dies the kernel closes its
//    sockets, so its mesh connections end without the goodbye a closing communicator
//    sends: every survivor sees that at once, whatever fabric carries the data (a UCX
//    endpoint or a WAN stream that the link would keep redialling may say nothing).
//  - Is it frozen? With a heartbeat period, each rank beats to its two ring neighbours
//    four times a period and declares a neighbour that stays silent a whole period lost.
//    Only neighbours beat, so the cost per rank does not grow with the job, across a WAN
//    included.
//  - Does everyone hear of a failure? A notice (a lost rank, a mismatch, a timeout) sent
//    by one rank reaches every other directly, not only its ring neighbours.
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

class ControlMesh {
 public:
  // Called on the mesh's thread; must not block for long.
  struct Events {
    std::function<void(int rank, const std::string& why)> lost;
    std::function<void(const ControlNotice&)> notice;
  };

  // Listens on bind_host at once; heartbeat 0 sends no beats. Connections in both
  // directions prove they know `secret` before any frame is read.
  ControlMesh(int rank, int size, const std::string& bind_host, std::chrono::milliseconds heartbeat,
              const JobSecret& secret);
  ~ControlMesh();  // goodbye(), then stops
  ControlMesh(const ControlMesh&) = delete;
  ControlMesh& operator=(const ControlMesh&) = delete;

  std::string address() const;  // "ip:port" to publish
  std::string host() const;     // the "ip" of it
  // Dials every higher rank, accepts the lower ones, and returns once all are connected.
  // TimeoutError names the ranks that were not. Events start only after this returns.
  void connect(const std::vector<std::string>& addresses, Clock::time_point deadline, Events events);

  // Any thread; returns at once. Goes to every peer still connected.
  void broadcast(const ControlNotice& n);
  // A tiny key-value store between ranks of the mesh: put() stores the pair here and
  // sends it to `to` (any thread, returns at once); wait() blocks until every key has
  // arrived, or throws: TimeoutError at the deadline naming the missing keys, or
  // PeerLostError when one of `needed` (the ranks expected to put them) is lost meanwhile.
  void put(const std::string& key, const std::string& value, const std::vector<int>& to);
  std::vector<std::string> wait(const std::vector<std::string>& keys, Clock::time_point deadline,
                                const std::vector<int>& needed);

  // Tells every peer this rank is leaving, so its connections' end is not taken for a
  // death, and waits (at most a second) for that to be written. No event is delivered
  // once it returns (one under way has finished), so the owner may then go. Idempotent.
  void goodbye();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::bootstrap
