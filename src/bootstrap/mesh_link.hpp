// One direction pair of the control mesh between this rank and a peer, free of sockets:
// the frames that must not be lost (notices, key-value puts, goodbye) are numbered from 1,
// kept until the peer acknowledges them, and after a broken connection is re-established
// the peer's RESUME says how many it received, so the rest is sent again, in order. The
// receiving side takes each number once: a frame sent again that already arrived is
// dropped. Beats and acknowledgements are not numbered: a lost one costs nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace strata::bootstrap {

class MeshLink {
 public:
  // Sending: the number the next reliable frame carries.
  std::uint64_t next_seq() const { return sent_ + 1; }
  // Keeps the encoded frame numbered next_seq() until acknowledged.
  void keep(std::string frame);
  // The peer received frames 1..n: they need not be kept.
  void acknowledged(std::uint64_t n);
  // After a reconnection, the peer's RESUME(n): the frames it lacks, in order.
  std::vector<std::string> resume(std::uint64_t n);
  std::size_t kept_bytes() const { return kept_bytes_; }

  // Receiving: what to do with reliable frame number `seq`.
  enum class Take { deliver, duplicate, gap };
  Take take(std::uint64_t seq);
  std::uint64_t received() const { return received_; }

 private:
  std::uint64_t sent_ = 0;      // frames numbered so far
  std::uint64_t acked_ = 0;     // the peer has 1..acked_
  std::deque<std::string> kept_;  // frames acked_+1 .. sent_
  std::size_t kept_bytes_ = 0;
  std::uint64_t received_ = 0;  // frames 1..received_ delivered here
};

}  // namespace strata::bootstrap
