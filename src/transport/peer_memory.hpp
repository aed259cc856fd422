// The memory the processes of one host share: reading another process's memory directly
// (Linux cross-memory attach, process_vm_readv: one copy through the kernel, with no
// message, staging buffer or handshake per transfer), and a segment every rank of the
// host maps (host_segment.hpp). Collectives among the processes of one host use both
// (collectives/single_copy.cpp).
//
// Whether it works is settled once, at start-up, for the whole host: every rank reads a
// token from every other rank of its host, maps the host's segment, and publishes
// whether all of that succeeded.
// The kernel may refuse (Yama's ptrace_scope, containers with their own PID namespaces,
// seccomp), and a process with another PID namespace could even be a different process
// under the same number: the token read catches both. Only if every rank of the host
// succeeded do any of them use it, so all ranks of a host agree and pick the same
// algorithms.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "bootstrap/store.hpp"
#include "transport/host_segment.hpp"

namespace strata::transport {

class PeerMemory {
 public:
  // Publishes this process's id and token under `prefix` and agrees with the ranks
  // whose same_host entry is true. `enabled` false: publishes a refusal, so the host's
  // other ranks stay off it too.
  PeerMemory(int rank, const std::vector<bool>& same_host, bool enabled, bootstrap::Store& store,
             const std::string& prefix, bootstrap::Clock::time_point deadline);

  // Bytes of each rank's slot in the host's shared segment.
  static constexpr std::size_t kSlotBytes = std::size_t{4} << 20;

  // True when peer is on this host and every rank of the host can read every other.
  bool shares(int peer) const { return pids_[static_cast<std::size_t>(peer)] > 0; }
  // Rank r's slot of the host's shared segment (kSlotBytes), mapped here; r is this rank
  // or one it shares() with. Only r writes it.
  char* slot(int r) const;
  // Copies `bytes` from address `addr` of peer's memory into dst. Throws TransportError
  // naming the peer if the kernel refuses (the peer exited, or the range is not mapped).
  void read(int peer, std::uint64_t addr, void* dst, std::size_t bytes) const;

 private:
  std::vector<pid_t> pids_;  // 0: not shared
  std::vector<int> slots_;   // by rank: index of its slot in segment_, -1 if none
  std::uint64_t token_ = 0;  // read by peers at start-up; lives as long as this object
  std::optional<HostSegment> segment_;
};

}  // namespace strata::transport
