// A block of shared memory that every rank of one host maps: one slot per rank, which
// only its owner writes and the others read with plain loads. Collectives among the
// processes of one host move their data through it (collectives/shared_memory.cpp): two
// plain copies that stay in cache cost less than one copy through the kernel, which pins
// every page; here the latter ran 3-4x slower per byte (BENCHMARKS.md, "A shared segment
// per host").
//
// Whether the host's ranks share one is settled once, at start-up, for the whole host:
// the lowest rank creates it under a random name and writes a random token into it, the
// others map it and check the token (a /dev/shm of another mount namespace fails here),
// and every rank publishes whether that worked. Only if every rank of the host succeeded
// do any of them use it, so all ranks of a host agree and pick the same algorithms. The
// name lives in /dev/shm only until every rank has answered; from then on the segment is
// anonymous memory that goes with the last process.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"

namespace strata::transport {

class HostSegment {
 public:
  // Bytes of each rank's slot.
  static constexpr std::size_t kSlotBytes = std::size_t{4} << 20;

  // Agrees with the ranks whose same_host entry is true, through keys under `prefix`.
  // `enabled` false: publishes a refusal, so the host's other ranks stay off it too.
  HostSegment(int rank, const std::vector<bool>& same_host, bool enabled, bootstrap::Store& store,
              const std::string& prefix, bootstrap::Clock::time_point deadline);
  HostSegment(const HostSegment&) = delete;
  HostSegment& operator=(const HostSegment&) = delete;
  ~HostSegment();

  // True when peer is another rank of this host and every rank of the host maps the segment.
  bool shares(int peer) const { return peer != rank_ && slots_[static_cast<std::size_t>(peer)] >= 0; }
  // Whether this rank has a slot: the host's ranks agreed on the segment.
  bool active() const { return slots_[static_cast<std::size_t>(rank_)] >= 0; }
  // Peers marked true never share it, even where they run on this host (ranks of another
  // region, when an emulation puts regions on one machine): both sides of each such pair
  // mark the other, so shares() stays symmetric.
  void exclude(const std::vector<bool>& peers);
  // Rank r's slot (kSlotBytes), as mapped here; r is this rank or one it shares() with.
  // Throws TransportError otherwise.
  char* slot(int r) const;

 private:
  void agree(const std::vector<bool>& same_host, bool enabled, bootstrap::Store& store, const std::string& prefix,
             bootstrap::Clock::time_point deadline);
  // Unlinks the name if this rank still holds it, and unmaps the segment.
  void release();

  int rank_;
  std::vector<int> slots_;  // by rank: index of its slot, -1 if none
  char* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::string created_;  // the name this rank created, until unlinked
};

// Which machine this process runs on (host name and boot id): ranks with equal identities
// may share memory.
std::string host_identity();
// By rank: whether it runs on this rank's machine, from identities published under
// `prefix` (this rank's included, true).
std::vector<bool> find_host_peers(bootstrap::Store& store, const std::string& prefix, int rank, int size,
                                  bootstrap::Clock::time_point deadline);

}  // namespace strata::transport
