// Reading and writing another process's memory on this host directly (Linux cross-memory
// attach, process_vm_readv/writev): one copy through the kernel, with no message, staging
// buffer or handshake per transfer. Collectives among the processes of one host use it to
// reduce a peer's data while it is still in cache and hand the result on while it still
// is (collectives/single_copy.cpp).
//
// Whether it works is settled once, at start-up, for the whole host: every rank reads a
// token from every other rank of its host, writes it back, and publishes whether all of
// that succeeded.
// The kernel may refuse (Yama's ptrace_scope, containers with their own PID namespaces,
// seccomp), and a process with another PID namespace could even be a different process
// under the same number: the token read catches both. Only if every rank of the host
// succeeded do any of them use it, so all ranks of a host agree and pick the same
// algorithms.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bootstrap/store.hpp"

namespace strata::transport {

class PeerMemory {
 public:
  // Publishes this process's id and token under `prefix` and agrees with the ranks
  // whose same_host entry is true. `enabled` false: publishes a refusal, so the host's
  // other ranks stay off it too.
  PeerMemory(int rank, const std::vector<bool>& same_host, bool enabled, bootstrap::Store& store,
             const std::string& prefix, bootstrap::Clock::time_point deadline);

  // True when peer is on this host and every rank of the host can read every other.
  bool shares(int peer) const { return pids_[static_cast<std::size_t>(peer)] > 0; }
  // Copies `bytes` from address `addr` of peer's memory into dst. Throws TransportError
  // naming the peer if the kernel refuses (the peer exited, or the range is not mapped).
  void read(int peer, std::uint64_t addr, void* dst, std::size_t bytes) const;
  // Copies `bytes` from src into address `addr` of peer's memory; the same errors.
  void write(int peer, std::uint64_t addr, const void* src, std::size_t bytes) const;

 private:
  void copy(int peer, std::uint64_t addr, void* mine, std::size_t bytes, bool to_peer) const;

  std::vector<pid_t> pids_;  // 0: not shared
  std::uint64_t token_ = 0;  // read by peers at start-up; lives as long as this object
};

}  // namespace strata::transport
