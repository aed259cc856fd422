#include "topology/region_order.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <tuple>

namespace strata::topology {

namespace {

bool better(const RegionRing& a, const RegionRing& b) {
  return std::tie(a.worst.beta, a.worst.alpha, a.alpha_sum, a.order) <
         std::tie(b.worst.beta, b.worst.alpha, b.alpha_sum, b.order);
}

// The pairs' figures looked up once: tours are scored many times over.
struct Matrix {
  std::vector<LinkCost> at;
  std::size_t n;
  Matrix(const Figures& f, const std::vector<std::string>& regions) : n(regions.size()) {
    at.reserve(n * n);
    for (const auto& a : regions)
      for (const auto& b : regions) at.push_back(f.wan_pair(a, b));
  }
  const LinkCost& operator()(std::size_t i, std::size_t j) const { return at[i * n + j]; }
};

RegionRing score(const Matrix& m, const std::vector<std::size_t>& tour, const std::vector<std::string>& names) {
  RegionRing r;
  for (std::size_t k = 0; k < tour.size(); ++k) r.order.push_back(names[tour[k]]);
  if (tour.size() < 2) return r;
  for (std::size_t k = 0; k < tour.size(); ++k) {
    const LinkCost& c = m(tour[k], tour[(k + 1) % tour.size()]);
    r.worst.alpha = std::max(r.worst.alpha, c.alpha);
    r.worst.beta = std::max(r.worst.beta, c.beta);
    r.worst.gap = std::max(r.worst.gap, c.gap);
    r.alpha_sum += c.alpha;
  }
  return r;
}

RegionRing exact(const Matrix& m, const std::vector<std::string>& names) {
  std::vector<std::size_t> tour(names.size());
  std::iota(tour.begin(), tour.end(), 0);
  RegionRing best = score(m, tour, names);
  while (std::next_permutation(tour.begin() + 1, tour.end())) {
    RegionRing r = score(m, tour, names);
    if (better(r, best)) best = std::move(r);
  }
  return best;
}

RegionRing heuristic(const Matrix& m, const std::vector<std::string>& names) {
  const std::size_t n = names.size();
  std::vector<std::size_t> tour{0};
  std::vector<bool> used(n, false);
  used[0] = true;
  while (tour.size() < n) {
    std::size_t next = n;
    for (std::size_t j = 0; j < n; ++j) {
      if (used[j]) continue;
      const LinkCost &c = m(tour.back(), j);
      if (next == n || std::tie(c.beta, c.alpha) < std::tie(m(tour.back(), next).beta, m(tour.back(), next).alpha))
        next = j;
    }
    used[next] = true;
    tour.push_back(next);
  }
  RegionRing best = score(m, tour, names);
  for (bool improved = true; improved;) {
    improved = false;
    for (std::size_t i = 1; i + 1 < n && !improved; ++i)
      for (std::size_t j = i + 1; j < n && !improved; ++j) {
        std::reverse(tour.begin() + static_cast<std::ptrdiff_t>(i), tour.begin() + static_cast<std::ptrdiff_t>(j) + 1);
        RegionRing r = score(m, tour, names);
        if (better(r, best)) {
          best = std::move(r);
          improved = true;
        } else {
          std::reverse(tour.begin() + static_cast<std::ptrdiff_t>(i), tour.begin() + static_cast<std::ptrdiff_t>(j) + 1);
        }
      }
  }
  return best;
}

}  // namespace

RegionRing ring_in_order(const Figures& f, const std::vector<std::string>& regions) {
  std::vector<std::size_t> tour(regions.size());
  std::iota(tour.begin(), tour.end(), 0);
  return score(Matrix(f, regions), tour, regions);
}

RegionRing best_ring(const Figures& f, const std::vector<std::string>& regions) {
  if (f.wan.empty() || regions.size() < 3) return ring_in_order(f, regions);
  const Matrix m(f, regions);
  return regions.size() <= kExactRegions ? exact(m, regions) : heuristic(m, regions);
}

std::string describe(const RegionRing& ring, const Figures& f) {
  if (ring.order.empty()) return "no regions";
  std::string s;
  for (const auto& r : ring.order) s += r + " -> ";
  s += ring.order.front();
  if (ring.order.size() < 2) return s;
  // The hop that sets the pace: the largest β, as the tour was judged.
  std::size_t at = 0;
  double beta = -1;
  for (std::size_t k = 0; k < ring.order.size(); ++k) {
    const LinkCost c = f.wan_pair(ring.order[k], ring.order[(k + 1) % ring.order.size()]);
    if (c.beta > beta) beta = c.beta, at = k;
  }
  const std::string& from = ring.order[at];
  const std::string& to = ring.order[(at + 1) % ring.order.size()];
  const LinkCost c = f.wan_pair(from, to);
  char buf[160];
  std::snprintf(buf, sizeof buf, " (slowest hop %s -> %s: %.1f ms, %.0f Mbit/s)", from.c_str(), to.c_str(),
                c.alpha * 1e3, c.beta > 0 ? 8 / c.beta / 1e6 : 0.0);
  return s + buf;
}

}  // namespace strata::topology
