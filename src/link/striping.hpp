// Adaptive striping: the next stripe of a peer's queue goes to the stream that has the
// fewest unacknowledged bytes, among streams that are up and have written everything
// given to them. A slow stream keeps bytes unacknowledged longer and so receives fewer
// stripes, instead of holding back an even split (NCCL's way) to its own pace.
#pragma once

#include <cstddef>
#include <span>

namespace strata::link {

struct StreamLoad {
  bool ready = false;          // connected, nothing assigned but unwritten
  std::size_t unacked = 0;     // bytes assigned and not yet acknowledged
};

// Index of the stream for a stripe of `bytes`, or -1 when none may take it: a stream
// must stay within `window` unacknowledged bytes, except an idle one (so stripes larger
// than the window still move, one at a time).
int pick_stream(std::span<const StreamLoad> streams, std::size_t bytes, std::size_t window);

// How many of a peer's `all` bulk streams its stripes go to, the rest dialled and idle:
// `narrow` of them from the start, all once those carry under `above` / 2 bytes/s
// together, `narrow` again once all carry at least `above` (`rate`: the best the lane's
// `width` streams carried lately, together, once they had time to find their share).
//
// Why fewer on a fast path: the kernel sends a paced stream's bytes in bursts of about a
// millisecond of its rate, so every stream costs the hosts (and any router in software)
// about a packet a millisecond, and four streams a peer at 1 Gbit/s and 25 ms were slower
// than two (1.14-1.24x the bound against 1.08-1.12x). Why all on a slow one: the ranks of
// a region share its uplink, more evenly with more flows, and a stage waits for its
// slowest rank (150 Mbit/s and 25 ms: four 1.07-1.09x, two 1.15-1.22x). Narrow from the
// start, because a stream set aside gives its share up at once, while streams that join
// late must win theirs from the others (four narrowed to two after the first call stayed
// at 1.16-1.20x). BENCHMARKS.md, 2026-12-04.
std::size_t next_bulk_width(std::size_t width, std::size_t all, std::size_t narrow, double above, double rate);

}  // namespace strata::link
