#include "link/striping.hpp"

namespace strata::link {

int pick_stream(std::span<const StreamLoad> streams, std::size_t bytes, std::size_t window) {
  int best = -1;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    const auto& s = streams[i];
    if (!s.ready) continue;
    if (s.unacked != 0 && s.unacked + bytes > window) continue;
    if (best < 0 || s.unacked < streams[static_cast<std::size_t>(best)].unacked)
      best = static_cast<int>(i);
  }
  return best;
}

}  // namespace strata::link
