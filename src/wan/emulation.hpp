// In-process WAN emulation (no privileges needed): STRATA_WAN_EMULATE holds
// "rate=200mbit,delay=25ms,window=4m,loss=0.001,cut=N" in any order, any subset.
//   rate   token bucket per peer pair, all streams together (bit|kbit|mbit|gbit per s)
//   delay  one-way delay: receivers hold frames (and senders hold acks) until their
//          sender's timestamp plus this (us|ms|s)
//   window at most this many unacknowledged bytes per stream (suffix k|m|g, binary)
//   loss   probability per frame that the sender drops the stream instead of writing it
//   corrupt  probability per frame that the sender garbles its CRC on the wire, so the
//          receiver sees a mismatch and drops the stream (tests that path)
//   cut    test hook: stream 0 of each peer is dropped once, after this many frames
// Delay compares the sender's steady-clock stamp with the receiver's clock, which only
// means something when both run on one machine, as emulation does.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::wan {

struct Emulation {
  double rate_bytes_per_s = 0;  // 0: unlimited
  std::chrono::nanoseconds delay{0};
  std::size_t window = 0;  // 0: no emulated window
  double loss = 0;
  double corrupt = 0;
  std::uint64_t cut_after = 0;  // 0: never
};

// Throws InvalidArgument naming the bad field.
Emulation parse_emulation(const std::string& spec);

// Bytes a sender may put on the wire now; refilled continuously at `rate`, holding at most
// `burst` so an idle link cannot then exceed its rate for long.
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  TokenBucket() = default;
  TokenBucket(double rate, double burst, Clock::time_point now)
      : rate_(rate), burst_(burst), tokens_(burst), last_(now) {}
  bool limited() const { return rate_ > 0; }
  // Takes n tokens if there are enough (or if the bucket is full, so a frame larger than
  // the burst still passes); otherwise returns when enough will have accrued.
  bool take(double n, Clock::time_point now, Clock::time_point* ready_at);

 private:
  double rate_ = 0, burst_ = 0, tokens_ = 0;
  Clock::time_point last_{};
};

}  // namespace strata::wan
