#include "topology/selector.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "strata/errors.hpp"
#include "topology/region_order.hpp"

namespace strata::topology {

using collectives::Algorithm;
using collectives::Group;

int ScoreTable::bucket(std::uint64_t bytes) {
  int b = 0;
  while (b + 1 < kBuckets && bucket_top(b) < bytes) ++b;
  return b;
}

std::vector<ScoreTable::Range> ScoreTable::ranges() const {
  std::vector<Range> out;
  for (int b = 0; b < kBuckets; ++b) {
    const auto& r = ranked[static_cast<std::size_t>(b)];
    const std::uint64_t lo = b == 0 ? 0 : bucket_top(b - 1) + 1;
    const std::uint64_t hi = b + 1 == kBuckets ? UINT64_MAX : bucket_top(b);
    const bool same = !out.empty() && !r.empty() &&
                      ranked[static_cast<std::size_t>(out.back().last_bucket)].front().algorithm == r.front().algorithm;
    if (same) {
      out.back().hi = hi;
      out.back().last_bucket = b;
    } else {
      out.push_back(Range{lo, hi, b, b});
    }
  }
  return out;
}

namespace {

// Among algorithms the model prices exactly alike (the formulas coincide, as every
// bandwidth-optimal allreduce's do on two ranks), prefer those that post every receive
// before any data moves: nothing then arrives before its buffer is known, which on TCP
// saves a copy of it. The rest keep registry order, the same on every rank.
int tie_rank(collectives::AlgorithmId a) {
  return a == collectives::AlgorithmId::direct || a == collectives::AlgorithmId::double_tree ? 0 : 1;
}

void rank_scores(std::vector<Score>& r) {
  std::stable_sort(r.begin(), r.end(), [](const Score& x, const Score& y) {
    const double tx = x.cost.total(), ty = y.cost.total();
    if (tx != ty) return tx < ty;
    return tie_rank(x.algorithm) < tie_rank(y.algorithm);
  });
}

}  // namespace

ScoreTable build_score_table(CollectiveKind kind, LinkClass cls, int p, const GroupCost& cost) {
  ScoreTable t;
  t.kind = kind;
  t.link_class = cls;
  t.group_size = p;
  t.cost = cost;
  t.ranked.resize(ScoreTable::kBuckets);
  for (int b = 0; b < ScoreTable::kBuckets; ++b) {
    auto& r = t.ranked[static_cast<std::size_t>(b)];
    for (const auto& a : collectives::algorithms())
      if (const auto c = predict(a.id, kind, p, static_cast<double>(ScoreTable::bucket_top(b)), cost))
        r.push_back(Score{a.id, *c});
    rank_scores(r);
  }
  return t;
}

const Algorithm& first_supported(const std::vector<Score>& ranked, CollectiveKind kind, DataType dt,
                                 std::size_t count, collectives::GroupShape group) {
  const int group_size = group.size;
  for (const auto& s : ranked) {
    const Algorithm& a = collectives::algorithm(s.algorithm);
    if (a.supports(kind, dt, count, group)) return a;
  }
  for (const auto& a : collectives::algorithms())
    if (a.supports(kind, dt, count, group)) return a;
  throw InvalidArgument(std::string("no registered algorithm implements ") + to_string(kind) + " of " +
                        to_string(dt) + " over " + std::to_string(group_size) + " ranks");
}

std::string explain(const std::vector<Score>& ranked) {
  if (ranked.empty()) return "no algorithm implements it";
  const Cost& c = ranked.front().cost;
  const double t = c.total();
  char buf[160];
  if (t <= 0) return "nothing to move";
  std::snprintf(buf, sizeof buf, "%s (α %.0f%%, β %.0f%%, γ %.0f%%)", c.bound(), 100 * c.alpha / t,
                100 * c.beta / t, 100 * c.gamma / t);
  std::string s = buf;
  if (ranked.size() > 1) {
    std::snprintf(buf, sizeof buf, "; %.2fx ahead of %s", ranked[1].cost.total() / t,
                  collectives::algorithm(ranked[1].algorithm).name);
    s += buf;
  }
  return s;
}

Selector::Selector(Figures figures, std::vector<Locality> localities, AlgorithmRules rules)
    : figures_(std::move(figures)), localities_(std::move(localities)), rules_(std::move(rules)) {}

LinkClass Selector::group_class(const Group& g) const {
  std::vector<Locality> members;
  members.reserve(g.ranks.size());
  for (int r : g.ranks) members.push_back(localities_.at(static_cast<std::size_t>(r)));
  return classify(members);
}

GroupCost Selector::class_cost(LinkClass c) const {
  GroupCost g{figures_.of(c).cost, figures_.gamma, static_cast<double>(figures_.chunk_bytes)};
  g.link.alpha += figures_.wait_alpha;
  return g;
}

GroupCost Selector::group_cost(const Group& g) const {
  const LinkClass c = group_class(g);
  GroupCost cost = class_cost(c);
  cost.servers = static_cast<int>(g.servers.size());
  cost.shared_memory = g.shared_memory;
  if (c == LinkClass::wan) {
    std::map<std::string, int> members, ring_out;  // per region
    std::vector<std::string> regions;
    const int p = g.size();
    for (int i = 0; i < p; ++i) {
      const std::string& reg = localities_.at(static_cast<std::size_t>(g.rank(i))).region;
      if (members[reg]++ == 0) regions.push_back(reg);
      if (localities_.at(static_cast<std::size_t>(g.rank((i + 1) % p))).region != reg) ++ring_out[reg];
    }
    cost.link = figures_.wan_worst(regions);
    cost.link.alpha += figures_.wait_alpha;
    if (!figures_.wan.empty()) {
      // The ring's own hops, where they differ from the slowest pair of all.
      std::vector<std::string> hops;
      for (int i = 0; i < p; ++i) {
        const std::string& reg = localities_.at(static_cast<std::size_t>(g.rank(i))).region;
        if (hops.empty() || hops.back() != reg) hops.push_back(reg);
      }
      if (hops.size() > 1 && hops.back() == hops.front()) hops.pop_back();
      LinkCost ring = ring_in_order(figures_, hops).worst;
      ring.alpha += figures_.wait_alpha;
      if (!(ring == cost.link)) cost.ring_link = ring;
    }
    for (const auto& [reg, n] : members) cost.wan_sharing = std::max(cost.wan_sharing, static_cast<double>(n));
    for (const auto& [reg, n] : ring_out) cost.ring_sharing = std::max(cost.ring_sharing, static_cast<double>(n));
  }
  return cost;
}

GroupCost Selector::cost_of(const Group& g) const {
  for (const auto& [ranks, cost] : known_)
    if (ranks == g.ranks && cost.servers == static_cast<int>(g.servers.size()) && cost.shared_memory == g.shared_memory)
      return cost;
  return group_cost(g);
}

collectives::EncodedExchange Selector::encoded_exchange(const Group& g, const collectives::EncodedShape& s) const {
  if (g.size() <= 2) return collectives::EncodedExchange::gather;
  if (forced_exchange_) return *forced_exchange_;
  return best_exchange(g.size(), s, cost_of(g));
}

void Selector::add_group(const Group& g) {
  if (g.ranks.empty()) return;
  const GroupCost cost = group_cost(g);
  const LinkClass cls = group_class(g);
  known_.emplace_back(g.ranks, cost);
  for (const auto kind : {CollectiveKind::allreduce, CollectiveKind::reduce_scatter, CollectiveKind::allgather,
                          CollectiveKind::broadcast, CollectiveKind::reduce, CollectiveKind::barrier})
    if (!find(kind, g.size(), cost)) tables_.push_back(build_score_table(kind, cls, g.size(), cost));
}

const ScoreTable* Selector::find(CollectiveKind kind, int p, const GroupCost& cost) const {
  for (const auto& t : tables_)
    if (t.kind == kind && t.group_size == p && t.cost.link == cost.link && t.cost.gamma == cost.gamma &&
        t.cost.chunk_bytes == cost.chunk_bytes && t.cost.ring_sharing == cost.ring_sharing &&
        t.cost.wan_sharing == cost.wan_sharing && t.cost.servers == cost.servers && t.cost.ring_link == cost.ring_link &&
        t.cost.shared_memory == cost.shared_memory)
      return &t;
  return nullptr;
}

const Algorithm& Selector::choose(CollectiveKind kind, DataType dt, std::size_t count, const Group& g) const {
  const int p = g.size();
  const std::uint64_t bytes = message_bytes(kind, count, dt, p);
  if (const AlgorithmRule* r = rules_.match(kind, bytes);
      r && r->algorithm && r->algorithm->supports(kind, dt, count, g.shape()))
    return *r->algorithm;
  const GroupCost cost = cost_of(g);
  if (const ScoreTable* t = find(kind, p, cost)) return first_supported(t->at(bytes), kind, dt, count, g.shape());
  // A group nobody registered: rank it here, the same way on every rank.
  std::vector<Score> ranked;
  const double top = static_cast<double>(ScoreTable::bucket_top(ScoreTable::bucket(bytes)));
  for (const auto& a : collectives::algorithms())
    if (const auto c = predict(a.id, kind, p, top, cost)) ranked.push_back(Score{a.id, *c});
  rank_scores(ranked);
  return first_supported(ranked, kind, dt, count, g.shape());
}

std::vector<Score> Selector::ranking(CollectiveKind kind, DataType dt, std::size_t count, const Group& g) const {
  const int p = g.size();
  const std::uint64_t bytes = message_bytes(kind, count, dt, p);
  const GroupCost cost = cost_of(g);
  std::vector<Score> ranked;
  if (const ScoreTable* t = find(kind, p, cost)) {
    ranked = t->at(bytes);
  } else {
    const double top = static_cast<double>(ScoreTable::bucket_top(ScoreTable::bucket(bytes)));
    for (const auto& a : collectives::algorithms())
      if (const auto c = predict(a.id, kind, p, top, cost)) ranked.push_back(Score{a.id, *c});
    rank_scores(ranked);
  }
  std::erase_if(ranked, [&](const Score& s) { return !collectives::algorithm(s.algorithm).supports(kind, dt, count, g.shape()); });
  return ranked;
}

std::string Selector::digest() const {
  std::string s;
  for (const auto& t : tables_)
    for (const auto& r : t.ranges()) {
      s += std::string(to_string(t.kind)) + " " + to_string(t.link_class) + " p=" + std::to_string(t.group_size) +
           (t.cost.servers ? " servers=" + std::to_string(t.cost.servers) : std::string()) +
           " " + format_size(r.lo) + "-" + format_size(r.hi) + " " +
           collectives::algorithm(t.ranked[static_cast<std::size_t>(r.last_bucket)].front().algorithm).name + "\n";
    }
  return s;
}

}  // namespace strata::topology
