// What ranks read back from the rendezvous store and from disk at creation: probe
// figures (published by the probing ranks and cached under $XDG_CACHE_HOME) and rank
// records. Probe text is refused, or parses to figures that print back to the same text
// and leave the cost model with finite, non-negative costs once applied.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bootstrap.pb.h"
#include "topology/figures.hpp"

namespace topo = strata::topology;

namespace {
bool sane(const topo::LinkCost& c) {
  const auto ok = [](double x) { return std::isfinite(x) && x >= 0; };
  return ok(c.alpha) && ok(c.beta) && ok(c.gap);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  if (const auto m = topo::parse_measured(s)) {
    const std::string again = topo::serialize(*m);
    const auto m2 = topo::parse_measured(again);
    if (!m2 || topo::serialize(*m2) != again) std::abort();
    topo::Figures f = topo::default_figures();
    topo::set_regions(f, {"a", "b", "c"});
    topo::apply_measured(f, *m, topo::Source::probed);
    for (const auto& l : f.link)
      if (!sane(l.cost)) std::abort();
    for (const auto& l : f.wan)
      if (!sane(l.cost)) std::abort();
    if (!std::isfinite(f.gamma) || f.gamma < 0) std::abort();
  }
  strata::bootstrap::wire::RankRecord rec;
  (void)rec.ParseFromString(s);
  return 0;
}
