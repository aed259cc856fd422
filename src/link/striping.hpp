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

}  // namespace strata::link
