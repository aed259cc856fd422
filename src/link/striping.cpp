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

std::size_t next_bulk_width(std::size_t width, std::size_t all, std::size_t narrow, double above, double rate) {
  if (narrow == 0 || narrow >= all) return all;
  if (width > narrow && rate >= above) return narrow;
  if (width <= narrow && rate < above / 2) return all;
  return width;
}

}  // namespace strata::link
