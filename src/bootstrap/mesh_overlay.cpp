#include "bootstrap/mesh_overlay.hpp"

#include <algorithm>

namespace strata::bootstrap {

std::vector<int> overlay_neighbours(int rank, int size, int full_upto) {
  std::vector<int> out;
  if (size <= 1 || rank < 0 || rank >= size) return out;
  if (size <= full_upto) {
    for (int r = 0; r < size; ++r)
      if (r != rank) out.push_back(r);
    return out;
  }
  const auto n = static_cast<long long>(size);
  auto link = [&](long long step) {
    out.push_back(static_cast<int>((rank + step) % n));
    out.push_back(static_cast<int>(((rank - step) % n + n) % n));
  };
  for (long long step = 1; 2 * step <= n; step *= 2) link(step);
  link(n / 2);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  std::erase(out, rank);
  return out;
}

bool FloodSeen::first(int origin, std::uint64_t seq) {
  if (origin < 0 || static_cast<std::size_t>(origin) >= per_origin_.size() || seq == 0) return false;
  auto& o = per_origin_[static_cast<std::size_t>(origin)];
  if (seq <= o.upto || !o.above.insert(seq).second) return false;
  while (!o.above.empty() && *o.above.begin() == o.upto + 1) {
    o.above.erase(o.above.begin());
    ++o.upto;
  }
  return true;
}

}  // namespace strata::bootstrap
