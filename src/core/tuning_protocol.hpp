// The online tuner's agreement (topology/tuner.hpp): every rank's timings of a size's
// exploration are judged on rank 0, on one clock, and every rank gets the same verdict.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "topology/tuner.hpp"
#include "transport/transport.hpp"

namespace strata::detail {

// A reading of this process's monotonic clock in seconds: the tuner's stamps, which rank 0
// compares across ranks.
inline double clock_seconds(transport::Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// Each candidate's time (Tuner::judge) from every rank's `mine` (Tuner::offer); all ranks
// (transport ranks 0 .. size-1) return the same bits. one_clock: every rank reads the same clock (one host:
// steady_clock is the kernel's monotonic clock), so no pings place the others'.
std::vector<double> agree_on_times(transport::Transport& t, int size, topology::Tuner& tuner, bool one_clock,
                                   std::uint64_t seq, CollectiveKind kind, std::uint64_t bytes, const std::vector<double>& mine,
                                   transport::Clock::time_point deadline);

}  // namespace strata::detail
