#include "collectives/alltoall.hpp"

#include <algorithm>
#include <cstring>

namespace strata::collectives {

namespace {

// One past the last byte a layout touches.
std::size_t extent(const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs, std::size_t esz) {
  std::size_t end = 0;
  for (std::size_t j = 0; j < counts.size(); ++j)
    if (counts[j]) end = std::max(end, (displs[j] + counts[j]) * esz);
  return end;
}

bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  if (!an || !bn) return false;
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + bn && y < x + an;
}

}  // namespace

Steps alltoall(Context& ctx, const Group& g, const CollArgs& a) {
  const Splits& s = *a.splits;
  const int p = g.size(), me = g.me;
  const std::size_t esz = dtype_size(a.dtype);
  auto at = [esz](const void* base, std::size_t displ) {
    return static_cast<const char*>(base) + displ * esz;
  };
  auto u = [](int j) { return static_cast<std::size_t>(j); };

  // In place: what this rank sends must be read before any receive may overwrite it.
  const void* send = a.send;
  const std::size_t send_extent = extent(s.send_counts, s.send_displs, esz);
  if (overlaps(a.send, send_extent, a.recv, extent(s.recv_counts, s.recv_displs, esz))) {
    void* copy = ctx.scratch(0, send_extent);
    std::memcpy(copy, a.send, send_extent);
    send = copy;
  }

  std::vector<RequestPtr> recvs(u(p)), sends;
  sends.reserve(u(p));
  for (int k = 1; k < p; ++k) {
    const int from = (me - k + p) % p;
    recvs[u(from)] = ctx.recv(g.rank(from), Channel::data, const_cast<char*>(at(a.recv, s.recv_displs[u(from)])),
                              s.recv_counts[u(from)] * esz);
  }
  for (int k = 1; k < p; ++k) {
    const int to = (me + k) % p;
    sends.push_back(ctx.send(g.rank(to), Channel::data, at(send, s.send_displs[u(to)]), s.send_counts[u(to)] * esz));
  }
  const std::size_t own = s.send_counts[u(me)] * esz;
  if (own) std::memmove(const_cast<char*>(at(a.recv, s.recv_displs[u(me)])), at(send, s.send_displs[u(me)]), own);
  for (int k = 1; k < p; ++k) {
    const int from = (me - k + p) % p;
    co_await ctx.wait(recvs[u(from)]);
    ctx.expect_bytes(recvs[u(from)], s.recv_counts[u(from)] * esz);
  }
  co_await ctx.wait_all(std::move(sends));
}

}  // namespace strata::collectives
