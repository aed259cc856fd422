#include "topology/figures.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace strata::topology {

namespace {

// Past this many region pairs, only region 0's are probed (see probe_pairs).
constexpr int kMaxWanPairs = 28;

std::string host_path(const Locality& l) { return l.region + "\n" + l.cluster + "\n" + l.rack + "\n" + l.host; }

const char* class_word(LinkClass c) { return to_string(c); }

std::optional<LinkClass> class_of_word(const std::string& w) {
  for (int i = 0; i < kLinkClasses; ++i)
    if (w == to_string(static_cast<LinkClass>(i))) return static_cast<LinkClass>(i);
  return std::nullopt;
}

std::string fmt(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

}  // namespace

std::vector<std::string> region_order(const std::vector<Locality>& ls) {
  std::vector<std::string> out;
  for (const auto& l : ls)
    if (std::find(out.begin(), out.end(), l.region) == out.end()) out.push_back(l.region);
  return out;
}

std::vector<ProbePair> probe_pairs(const std::vector<Locality>& ls) {
  std::vector<ProbePair> out;
  const int n = static_cast<int>(ls.size());
  auto ranks_on = [&](const std::string& host) {
    std::vector<int> on;
    for (int r = 0; r < n; ++r)
      if (host_path(ls[static_cast<std::size_t>(r)]) == host) on.push_back(r);
    return on;
  };
  // Same host: the two lowest ranks of the first host that has two; its others in pairs.
  {
    std::map<std::string, int> first;
    for (int r = 0; r < n; ++r) {
      auto [it, fresh] = first.try_emplace(host_path(ls[static_cast<std::size_t>(r)]), r);
      if (!fresh) {
        ProbePair p{LinkClass::shm, it->second, r};
        const auto on = ranks_on(it->first);
        for (std::size_t i = 2; i + 1 < on.size(); i += 2) p.companions.emplace_back(on[i], on[i + 1]);
        out.push_back(std::move(p));
        break;
      }
    }
  }
  // Hosts of one region: the lowest ranks of the first two hosts of the first region
  // that has two; their i-th ranks in pairs alongside.
  {
    std::map<std::string, int> first_host;  // region -> lowest rank
    for (int r = 0; r < n; ++r) {
      const auto& l = ls[static_cast<std::size_t>(r)];
      auto [it, fresh] = first_host.try_emplace(l.region, r);
      if (!fresh && host_path(ls[static_cast<std::size_t>(it->second)]) != host_path(l)) {
        ProbePair p{LinkClass::net, it->second, r};
        const auto a = ranks_on(host_path(ls[static_cast<std::size_t>(it->second)])), b = ranks_on(host_path(l));
        for (std::size_t i = 1; i < std::min(a.size(), b.size()); ++i) p.companions.emplace_back(a[i], b[i]);
        out.push_back(std::move(p));
        break;
      }
    }
  }
  // Regions: the lowest rank of each.
  const auto regions = region_order(ls);
  std::vector<int> lowest;
  for (const auto& reg : regions)
    for (int r = 0; r < n; ++r)
      if (ls[static_cast<std::size_t>(r)].region == reg) {
        lowest.push_back(r);
        break;
      }
  const int R = static_cast<int>(regions.size());
  const bool all_pairs = R * (R - 1) / 2 <= kMaxWanPairs;
  for (int a = 0; a < R; ++a)
    for (int b = a + 1; b < R; ++b)
      if (all_pairs || a == 0)
        out.push_back(ProbePair{LinkClass::wan, lowest[static_cast<std::size_t>(a)], lowest[static_cast<std::size_t>(b)], a, b});
  return out;
}

std::string serialize(const Measured& m) {
  std::string s = "gamma " + fmt(m.gamma) + "\n";
  for (const auto& p : m.pairs)
    s += std::string("pair ") + class_word(p.pair.cls) + " " + std::to_string(p.pair.from) + " " +
         std::to_string(p.pair.to) + " " + std::to_string(p.pair.region_a) + " " + std::to_string(p.pair.region_b) +
         " " + fmt(p.cost.alpha) + " " + fmt(p.cost.beta) + " " + fmt(p.cost.gap) + " " +
         (p.beta_measured ? "1" : "0") + " " + (p.gap_measured ? "1" : "0") + " " +
         std::to_string(p.small_iters) + " " + std::to_string(p.large_iters) +
         (p.cost.loss > 0 ? " loss " + fmt(p.cost.loss) : "") + "\n";
  return s;
}

std::optional<Measured> parse_measured(const std::string& text) {
  Measured m;
  std::istringstream in(text);
  std::string word;
  bool have_gamma = false;
  while (in >> word) {
    if (word == "gamma") {
      if (!(in >> m.gamma)) return std::nullopt;
      have_gamma = true;
    } else if (word == "pair") {
      PairResult p;
      std::string cls;
      int beta_measured = 0, gap_measured = 0;
      if (!(in >> cls >> p.pair.from >> p.pair.to >> p.pair.region_a >> p.pair.region_b >> p.cost.alpha >>
            p.cost.beta >> p.cost.gap >> beta_measured >> gap_measured >> p.small_iters >> p.large_iters))
        return std::nullopt;
      p.gap_measured = gap_measured != 0;
      const auto c = class_of_word(cls);
      if (!c) return std::nullopt;
      p.pair.cls = *c;
      p.beta_measured = beta_measured != 0;
      // An optional "loss X" ends the record (records written before it have none).
      const auto at = in.tellg();
      std::string next;
      if (in >> next && next == "loss") {
        if (!(in >> p.cost.loss) || !(p.cost.loss >= 0 && p.cost.loss < 1)) return std::nullopt;
      } else {
        in.clear();
        in.seekg(at);
      }
      m.pairs.push_back(p);
    } else {
      return std::nullopt;
    }
  }
  if (!have_gamma) return std::nullopt;
  // The text comes from the store or a cache file: figures the cost model cannot price
  // with (negative, infinite) are a malformed record, not a measurement.
  const auto sane = [](double x) { return std::isfinite(x) && x >= 0; };
  if (!sane(m.gamma)) return std::nullopt;
  for (const auto& p : m.pairs)
    if (!sane(p.cost.alpha) || !sane(p.cost.beta) || !sane(p.cost.gap) || p.small_iters < 0 || p.large_iters < 0)
      return std::nullopt;
  return m;
}

void set_regions(Figures& f, std::vector<std::string> regions) {
  f.regions = std::move(regions);
  const std::size_t n = f.regions.size();
  f.wan.assign(n * n, f.of(LinkClass::wan));
}

std::optional<Measured> carry_over(const Measured& parent, const std::vector<std::string>& from_regions,
                                   const std::vector<ProbePair>& needed, const std::vector<std::string>& to_regions) {
  auto index_in = [](const std::vector<std::string>& v, int i) -> const std::string* {
    return i >= 0 && static_cast<std::size_t>(i) < v.size() ? &v[static_cast<std::size_t>(i)] : nullptr;
  };
  auto to_index = [&](const std::string& name) {
    const auto it = std::find(to_regions.begin(), to_regions.end(), name);
    return it == to_regions.end() ? -1 : static_cast<int>(it - to_regions.begin());
  };
  Measured out;
  out.gamma = parent.gamma;
  for (const auto& p : parent.pairs) {
    PairResult q = p;
    if (p.pair.cls == LinkClass::wan) {
      const std::string *a = index_in(from_regions, p.pair.region_a), *b = index_in(from_regions, p.pair.region_b);
      if (!a || !b) continue;
      q.pair.region_a = to_index(*a);
      q.pair.region_b = to_index(*b);
      if (q.pair.region_a < 0 || q.pair.region_b < 0) continue;
    }
    out.pairs.push_back(q);
  }
  for (const auto& n : needed) {
    const bool found = std::any_of(out.pairs.begin(), out.pairs.end(), [&](const PairResult& r) {
      if (r.pair.cls != n.cls) return false;
      if (n.cls != LinkClass::wan) return true;
      return (r.pair.region_a == n.region_a && r.pair.region_b == n.region_b) ||
             (r.pair.region_a == n.region_b && r.pair.region_b == n.region_a);
    });
    if (!found) return std::nullopt;
  }
  return out;
}

void apply_measured(Figures& f, const Measured& m, Source source) {
  if (m.gamma > 0) {
    f.gamma = m.gamma;
    f.gamma_source = source;
  }
  const std::size_t n = f.regions.size();
  bool any_wan = false;
  LinkFigure worst{{0, 0}, source};
  for (const auto& p : m.pairs) {
    LinkFigure fig = f.of(p.pair.cls);
    fig.cost.alpha = p.cost.alpha;
    fig.cost.loss = p.cost.loss;
    if (p.beta_measured) fig.cost.beta = p.cost.beta;
    if (p.gap_measured) fig.cost.gap = p.cost.gap;
    fig.source = source;
    if (p.pair.cls != LinkClass::wan) {
      f.of(p.pair.cls) = fig;
      continue;
    }
    const auto a = static_cast<std::size_t>(p.pair.region_a), b = static_cast<std::size_t>(p.pair.region_b);
    if (a >= n || b >= n || f.wan.size() != n * n) continue;
    // A round trip cannot tell the directions apart.
    f.wan[a * n + b] = f.wan[b * n + a] = fig;
    worst.cost.alpha = std::max(worst.cost.alpha, fig.cost.alpha);
    worst.cost.beta = std::max(worst.cost.beta, fig.cost.beta);
    worst.cost.gap = std::max(worst.cost.gap, fig.cost.gap);
    worst.cost.loss = std::max(worst.cost.loss, fig.cost.loss);
    any_wan = true;
  }
  // Past kMaxWanPairs only region 0's pairs were measured: a pair between two other
  // regions is taken to be as slow as the slower of their links to region 0.
  if (any_wan && n > 1)
    for (std::size_t a = 1; a < n; ++a)
      for (std::size_t b = 1; b < n; ++b)
        if (a != b && f.wan[a * n + b].source != source) {
          const auto& x = f.wan[a], &y = f.wan[b];
          f.wan[a * n + b] = LinkFigure{{std::max(x.cost.alpha, y.cost.alpha), std::max(x.cost.beta, y.cost.beta),
                                         std::max(x.cost.gap, y.cost.gap), std::max(x.cost.loss, y.cost.loss)},
                                        source};
        }
  if (any_wan) f.of(LinkClass::wan) = worst;
}

void apply_file(Figures& f, const TopologyFile& file) {
  // Files give latency and bandwidth; the gap stays what it was (probed or built in).
  auto from_link = [](const LinkFigures& l, double gap) {
    return LinkFigure{{l.latency_us * 1e-6, l.bandwidth_gbps > 0 ? 8 / (l.bandwidth_gbps * 1e9) : 0, gap}, Source::file};
  };
  if (file.host) f.of(LinkClass::shm) = from_link(*file.host, f.of(LinkClass::shm).cost.gap);
  if (file.rack)
    f.of(LinkClass::net) = from_link(*file.rack, f.of(LinkClass::net).cost.gap);
  else if (file.cluster)
    f.of(LinkClass::net) = from_link(*file.cluster, f.of(LinkClass::net).cost.gap);
  const std::size_t n = f.regions.size();
  bool any = false;
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b) {
      const WanLink* w = a == b ? nullptr : file.wan_link(f.regions[a], f.regions[b]);
      if (!w) continue;
      f.wan[a * n + b] = LinkFigure{
          {w->latency_ms * 1e-3, w->bandwidth_mbps > 0 ? 8 / (w->bandwidth_mbps * 1e6) : 0, f.wan[a * n + b].cost.gap,
           w->loss_percent / 100},
          Source::file};
      any = true;
    }
  if (!any) return;
  // The class-wide WAN figure (for groups whose regions are not known) is the slowest pair.
  LinkFigure worst{{0, 0}, Source::file};
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b)
      if (a != b) {
        worst.cost.alpha = std::max(worst.cost.alpha, f.wan[a * n + b].cost.alpha);
        worst.cost.beta = std::max(worst.cost.beta, f.wan[a * n + b].cost.beta);
        worst.cost.gap = std::max(worst.cost.gap, f.wan[a * n + b].cost.gap);
        worst.cost.loss = std::max(worst.cost.loss, f.wan[a * n + b].cost.loss);
      }
  f.of(LinkClass::wan) = worst;
}

}  // namespace strata::topology
