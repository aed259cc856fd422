// A block of shared memory that every rank of one host maps: one slot per rank, which
// only its owner writes and the others read with plain loads. Copying through it costs
// two user-space copies that stay in cache, where cross-memory attach (peer_memory.hpp)
// costs one copy through the kernel that pins every page; on this project's machines
// the latter ran 3-4x slower per byte (BENCHMARKS.md, "A shared segment per host").
//
// The segment lives in /dev/shm only while the ranks of the host map it: the lowest
// rank creates it under a random name, the others open it, and the creator unlinks
// the name once every rank said it mapped it (or failed to). From then on it is
// anonymous memory that disappears with the last process.
#pragma once

#include <cstddef>
#include <string>

namespace strata::transport {

class HostSegment {
 public:
  // Creates a segment of `bytes` under a fresh name; throws TransportError naming what
  // failed (no /dev/shm, not enough room: the memory is reserved here, not at first touch).
  static HostSegment create(std::size_t bytes);
  // Maps the segment another rank created.
  static HostSegment open(const std::string& name, std::size_t bytes);
  // Removes the name; the mapping stays.
  static void unlink(const std::string& name);

  HostSegment(HostSegment&& o) noexcept;
  HostSegment& operator=(HostSegment&& o) noexcept;
  HostSegment(const HostSegment&) = delete;
  HostSegment& operator=(const HostSegment&) = delete;
  ~HostSegment();

  const std::string& name() const { return name_; }
  char* data() const { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  HostSegment(std::string name, char* data, std::size_t bytes) : name_(std::move(name)), data_(data), bytes_(bytes) {}
  std::string name_;
  char* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace strata::transport
