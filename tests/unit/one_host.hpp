// One host of n ranks with loopback-like figures, for the selector's and tuner's tests.
#pragma once

#include <vector>

#include "strata/locality.hpp"
#include "topology/cost_model.hpp"

namespace strata::topology {

inline Figures shm_figures() {
  Figures f = default_figures();
  f.of(LinkClass::shm) = LinkFigure{{1e-5, 1 / 3e9}, Source::probed};
  f.gamma = 1e-10;
  return f;
}

inline std::vector<Locality> one_host(int n) {
  std::vector<Locality> ls;
  for (int r = 0; r < n; ++r) ls.push_back(Locality{"", "", "", "h", r});
  return ls;
}

}  // namespace strata::topology
