#include "topology/cost_model.hpp"

#include <algorithm>
#include <cmath>


namespace strata::topology {

namespace {

using collectives::AlgorithmId;
using K = CollectiveKind;

// The one table of built-in figures. Probing replaces a class's α and β with what it
// measured and a topology file with what it states; these remain where neither applies
// (STRATA_PROBE=0, or a class with no pair of ranks to probe).
struct DefaultRow {
  LinkClass cls;
  double alpha;  // s
  double beta;   // s/B
  double gap;    // s
};
constexpr DefaultRow kDefaults[] = {
    // Same host. α: strata over UCX completes an 8-byte allreduce between two local ranks
    // in 4.3-5.9 µs (BENCHMARKS.md, 8-byte latency), one message each way. β: the same
    // runs reach 5 GB/s bus bandwidth at 4 MiB, where copies through shared memory bound it.
    // Gap: a fifth of α, about one more trip through the sender's and receiver's stacks.
    {LinkClass::shm, 5e-6, 1 / 5e9, 1e-6},
    // Hosts of one region. α: NCCL 2.30's tuning.cc charges a network hop 2.7-14 µs of
    // hardware latency on top of a 6.6-8.4 µs base (reference, NCCL cost model). β: a
    // 100 Gbit/s RoCE or InfiniBand NIC. Gap: a work request and its completion, ~1 µs.
    {LinkClass::net, 10e-6, 8 / 100e9, 1e-6},
    // Between regions. α: half the ~80 ms us-east-1 <-> eu-west-1 round trip (reference §4,
    // typical inter-region RTTs). β: 10 Gbit/s, the reference's WAN example (§0). Gap: the
    // WAN link frames each message on its own (src/wan), tens of µs; small next to α.
    {LinkClass::wan, 40e-3, 8 / 10e9, 20e-6},
};
// γ: the f32 sum kernel at memory bandwidth, 10.5 GB/s at 16 MiB (BENCHMARKS.md,
// Reduction kernels). probe.cpp measures it at creation unless STRATA_PROBE=0.
constexpr double kDefaultGamma = 1 / 10.5e9;

int log2_floor(int p) {
  int k = 0;
  while ((2 << k) <= p) ++k;
  return k;
}
int log2_ceil(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}

// Cost terms in the order the formulas of DESIGN §6 write them.
// `queued`: messages a rank posts beyond the first of each round, on the critical path.
Cost terms(double rounds, double bytes_on_link, double bytes_reduced, const GroupCost& g, double queued = 0) {
  return Cost{rounds * g.link.alpha + queued * g.link.gap, bytes_on_link * g.link.beta, bytes_reduced * g.gamma};
}

// Chunks a pipelined algorithm cuts n bytes into, as patterns.hpp's chunk_count does.
double chunks(double n, double chunk) { return std::max(1.0, std::ceil(n / std::max(chunk, 1.0))); }

// Dedicated servers: push then pull, two hops. A worker's link carries the vector out
// (N) and what it pulls back; a server's carries p pushes of its shard in and p pulls
// out, and it reduces p - 1 copies of its shard. Links are full duplex, so the busier
// direction of the busiest link counts; both sides post one message per peer at once.
std::optional<Cost> param_server(int p, double N, double pulled, const GroupCost& g) {
  if (g.servers < 1) return std::nullopt;
  const double S = g.servers, q = p;
  const double shard = N / S;
  const double on_link = std::max(std::max(N, pulled), q * shard);
  return terms(2, on_link, (q - 1) * shard, g, 2 * (std::max(q, S) - 1));
}

// shared_memory (through the host's shared segment): `rounds` of p - 1 empty notices each
// and no byte on a link. A rank's copies into and out of slots and its reductions (one
// operand in cache) each move two memory streams where γ prices a reduction's three, so
// `moved` bytes cost 2/3 of γ.
std::optional<Cost> shared_memory(double rounds, double moved, int p, const GroupCost& g) {
  if (!g.shared_memory) return std::nullopt;
  return terms(rounds, 0, moved * 2 / 3, g, rounds * (p - 2.0));
}

std::optional<Cost> allreduce(AlgorithmId a, int p, double N, const GroupCost& g) {
  const double q = p, f = (q - 1) / q;
  const int p2 = 1 << log2_floor(p), L = log2_floor(p);
  const bool fold = p2 != p;
  switch (a) {
    case AlgorithmId::ring:
      return terms(2 * (q - 1), 2 * f * N, f * N, g);
    case AlgorithmId::halving_doubling: {
      // Folding a non-power of two costs a whole vector to the partner and back.
      const double f2 = (p2 - 1.0) / p2;
      return terms(2 * L + (fold ? 2 : 0), 2 * f2 * N + (fold ? 2 * N : 0), f2 * N + (fold ? N : 0), g);
    }
    case AlgorithmId::recursive_doubling:
      return terms(L + (fold ? 2 : 0), L * N + (fold ? 2 * N : 0), L * N + (fold ? N : 0), g);
    case AlgorithmId::double_tree: {
      // Up and down a tree of depth d, pipelined: the first chunk pays every hop, the
      // rest stream behind it. An interior rank receives two children's halves and
      // sends three (one up, two down) while it is a leaf in the other tree; with two
      // ranks each rank is the root of one tree and the leaf of the other.
      const double d = log2_floor(p), s = std::min(g.chunk_bytes, N / 2);
      const double wire = p == 2 ? N : 2 * N, reduced = p == 2 ? N / 2 : N;
      // On the way down every interior rank sends to two children at once.
      return terms(2 * d, wire + (2 * d - 1) * s, reduced, g, p == 2 ? 0 : d);
    }
    case AlgorithmId::direct:
      // Two rounds, each of p - 1 messages posted at once.
      return terms(2, 2 * f * N, f * N, g, 2 * (q - 2));
    case AlgorithmId::param_server:
      return param_server(p, N, N, g);
    case AlgorithmId::exchange: {
      // One round per chunk, each of p - 1 messages posted at once; every rank sends
      // (and reduces) p - 1 whole vectors.
      const double C = chunks(N, g.chunk_bytes);
      return terms(C, (q - 1) * N, (q - 1) * N, g, C * (q - 2));
    }
    case AlgorithmId::shared_memory:  // fN into the slot, fN reduced, fN out of peers' slots
      return shared_memory(3, 3 * f * N, p, g);
    default:
      return std::nullopt;
  }
}

// N: the whole input of one rank (p blocks).
std::optional<Cost> reduce_scatter(AlgorithmId a, int p, double N, const GroupCost& g) {
  const double q = p, f = (q - 1) / q;
  const int p2 = 1 << log2_floor(p), L = log2_floor(p);
  const bool fold = p2 != p;
  switch (a) {
    case AlgorithmId::ring:
      return terms(q - 1, f * N, f * N, g);
    case AlgorithmId::halving_doubling: {
      const double f2 = (p2 - 1.0) / p2;
      return terms(L + (fold ? 2 : 0), f2 * N + (fold ? N + N / q : 0), f2 * N + (fold ? N : 0), g);
    }
    case AlgorithmId::direct:
      return terms(1, f * N, f * N, g, q - 2);
    case AlgorithmId::param_server:
      return param_server(p, N, N / q, g);
    case AlgorithmId::shared_memory:  // fN into the slot, fN reduced
      return shared_memory(2, 2 * f * N, p, g);
    default:
      return std::nullopt;
  }
}

// N: the whole output of one rank (p blocks).
std::optional<Cost> allgather(AlgorithmId a, int p, double N, const GroupCost& g) {
  const double q = p, f = (q - 1) / q;
  const int p2 = 1 << log2_floor(p), L = log2_floor(p);
  const bool fold = p2 != p;
  switch (a) {
    case AlgorithmId::ring:
      return terms(q - 1, f * N, 0, g);
    case AlgorithmId::halving_doubling: {
      const double f2 = (p2 - 1.0) / p2;
      return terms(L + (fold ? 2 : 0), f2 * N + (fold ? N + N / q : 0), 0, g);
    }
    case AlgorithmId::direct:
      return terms(1, f * N, 0, g, q - 2);
    case AlgorithmId::shared_memory:  // N/p into the slot, fN out of peers' slots
      return shared_memory(2, N, p, g);
    default:
      return std::nullopt;
  }
}

std::optional<Cost> broadcast(AlgorithmId a, int p, double N, const GroupCost& g) {
  switch (a) {
    case AlgorithmId::binomial: {
      // The root sends the whole vector to each of its ceil(log2 p) children in turn.
      const double L = log2_ceil(p);
      return terms(L, L * N, 0, g);
    }
    case AlgorithmId::chain: {
      // p - 1 hops for the first chunk, then one chunk time for each of the others. The
      // fill is charged a whole chunk (or the vector, if smaller): an upper bound that
      // never falls as the vector grows past a chunk boundary.
      const double C = chunks(N, g.chunk_bytes), s = std::min(g.chunk_bytes, N);
      return terms(p - 2 + C, N + (p - 2) * s, 0, g);
    }
    case AlgorithmId::double_tree: {
      // The root feeds two trees over the other p - 1 ranks; an interior rank forwards
      // its half to two children, so the busiest link carries the vector once.
      const double d = log2_floor(std::max(1, p - 1)) + 1;
      const double C = chunks(N / 2, g.chunk_bytes), s = std::min(g.chunk_bytes, N / 2);
      // The root feeds two trees, and interior ranks two children, at each hop.
      return terms(d + C - 1, N + (d - 1) * s, 0, g, d);
    }
    default:
      return std::nullopt;
  }
}

std::optional<Cost> reduce(AlgorithmId a, int p, double N, const GroupCost& g) {
  const double q = p, f = (q - 1) / q;
  switch (a) {
    case AlgorithmId::binomial: {
      const double L = log2_ceil(p);
      return terms(L, L * N, L * N, g);
    }
    case AlgorithmId::ring:
      // Ring reduce-scatter, then every block to the root at once.
      return terms(q, 2 * f * N, f * N, g, q - 2);
    default:
      return std::nullopt;
  }
}

}  // namespace

const char* to_string(LinkClass c) {
  switch (c) {
    case LinkClass::shm: return "shm";
    case LinkClass::net: return "net";
    case LinkClass::wan: return "wan";
  }
  return "?";
}

const char* to_string(Source s) {
  switch (s) {
    case Source::builtin: return "built-in";
    case Source::probed: return "probed";
    case Source::cached: return "probed (cached)";
    case Source::file: return "topology file";
  }
  return "?";
}

LinkCost Figures::wan_pair(const std::string& from, const std::string& to) const {
  const auto at = [&](const std::string& r) {
    return static_cast<std::size_t>(std::find(regions.begin(), regions.end(), r) - regions.begin());
  };
  const std::size_t i = at(from), j = at(to), n = regions.size();
  if (i < n && j < n && wan.size() == n * n) return wan[i * n + j].cost;
  return of(LinkClass::wan).cost;
}

LinkCost priced_with_loss(LinkCost c, double message_bytes) {
  if (c.loss <= 0) return c;
  constexpr double kPacket = 1448;  // a TCP segment's payload on a 1500-byte path
  const double loss = std::min(c.loss, 0.5);
  const double packets = std::max(1.0, std::ceil(message_bytes / kPacket));
  const double hit = 1 - std::pow(1 - loss, packets);
  c.alpha += 2.5 * c.alpha * hit;
  c.beta /= 1 - loss;
  return c;
}

LinkCost Figures::wan_worst(const std::vector<std::string>& among) const {
  if (among.size() < 2 || wan.empty()) return of(LinkClass::wan).cost;
  LinkCost worst;
  for (const auto& a : among)
    for (const auto& b : among) {
      if (a == b) continue;
      const LinkCost c = wan_pair(a, b);
      worst.alpha = std::max(worst.alpha, c.alpha);
      worst.beta = std::max(worst.beta, c.beta);
      worst.gap = std::max(worst.gap, c.gap);
      worst.loss = std::max(worst.loss, c.loss);
    }
  return worst;
}

Figures default_figures() {
  Figures f;
  for (const auto& row : kDefaults) f.of(row.cls) = LinkFigure{{row.alpha, row.beta, row.gap}, Source::builtin};
  f.gamma = kDefaultGamma;
  return f;
}

const char* Cost::bound() const {
  const double t = total();
  if (t <= 0) return "free";
  if (alpha > t / 2) return "α-bound";
  if (beta > t / 2) return "β-bound";
  if (gamma > t / 2) return "γ-bound";
  return "mixed";
}

std::optional<Cost> predict(AlgorithmId a, CollectiveKind kind, int p, double bytes, const GroupCost& g) {
  if (a == AlgorithmId::dissemination)
    return kind == K::barrier ? std::optional<Cost>(terms(log2_ceil(p), 0, 0, g)) : std::nullopt;
  if (kind == K::barrier)  // exchange: one round of p - 1 messages posted at once
    return a == AlgorithmId::exchange ? std::optional<Cost>(terms(1, 0, 0, g, p - 2.0)) : std::nullopt;
  // Rings and chains hand data to the next member only; ring_reduce's gather to the root
  // is small next to its ring, so it counts as one.
  const bool ring_like = a == AlgorithmId::ring || a == AlgorithmId::chain;
  GroupCost along = g;
  if (ring_like && g.ring_link) along.link = *g.ring_link;
  // Where the path loses packets, each message (a chunk, or the whole call when smaller)
  // pays for the holes it meets.
  along.link = priced_with_loss(along.link, std::min(bytes, g.chunk_bytes));
  std::optional<Cost> c;
  switch (kind) {
    case K::allreduce: c = allreduce(a, p, bytes, along); break;
    case K::reduce_scatter: c = reduce_scatter(a, p, bytes, along); break;
    case K::allgather: c = allgather(a, p, bytes, along); break;
    case K::broadcast: c = broadcast(a, p, bytes, along); break;
    case K::reduce: c = reduce(a, p, bytes, along); break;
    default: return std::nullopt;
  }
  // One rank moves nothing; every algorithm is a local copy.
  if (c && p <= 1) return Cost{};
  if (c) c->beta *= ring_like ? g.ring_sharing : g.wan_sharing;
  return c;
}

Best best_flat(CollectiveKind kind, int p, double bytes, const GroupCost& g) {
  std::optional<Best> best;
  for (const auto& a : collectives::algorithms())
    if (const auto c = predict(a.id, kind, p, bytes, g); c && (!best || c->total() < best->cost.total()))
      best = Best{a.id, *c};
  return best.value_or(Best{});
}

Cost predict_split_rail(CollectiveKind kind, const std::vector<LevelCost>& levels, double bytes,
                        std::size_t small_bytes) {
  if (levels.empty()) return {};
  Cost total;
  const LevelCost& top = levels.back();
  auto ring = [](CollectiveKind k, const LevelCost& l, double n) { return *predict(AlgorithmId::ring, k, l.size, n, l.cost); };
  switch (kind) {
    case K::allreduce: {
      if (bytes <= static_cast<double>(small_bytes)) {
        for (const auto& l : levels) total = total + best_flat(K::allreduce, l.size, bytes, l.cost).cost;
        return total;
      }
      const Descent d = split_rail_descent(levels, bytes);
      // Two regions exchange their shards in one step, not the ring's two
      // (collectives/ring.cpp, ring_allreduce_pieces).
      Cost across = ring(K::allreduce, top, d.top_bytes);
      if (top.size == 2) across.alpha /= 2;
      return d.cost + across;
    }
    case K::reduce_scatter:
    case K::allgather: {
      double n = bytes;
      for (const auto& l : levels) {
        total = total + ring(kind, l, n);
        n /= l.size;
      }
      return total;
    }
    case K::broadcast: {
      if (bytes <= static_cast<double>(small_bytes)) {
        for (const auto& l : levels) total = total + best_flat(K::broadcast, l.size, bytes, l.cost).cost;
        return total;
      }
      // Scatter inside the root's region (one message per member, whole range once),
      // broadcast the shard along the rail, allgather back up.
      double n = bytes;
      for (std::size_t i = 0; i + 1 < levels.size(); ++i) {
        const auto& l = levels[i];
        const double f = (l.size - 1.0) / l.size;
        total = total + Cost{l.cost.link.alpha + (l.size - 2) * l.cost.link.gap, f * n * l.cost.link.beta, 0} +
                ring(K::allgather, l, n);
        n /= l.size;
      }
      return total + best_flat(K::broadcast, top.size, n, top.cost).cost;
    }
    default:
      return total;
  }
}

Descent split_rail_descent(const std::vector<LevelCost>& levels, double bytes) {
  Descent d;
  d.top_bytes = bytes;
  for (std::size_t i = 0; i + 1 < levels.size(); ++i) {
    // Down and back up: a reduce-scatter and an allgather of the same range.
    const auto& l = levels[i];
    d.cost = d.cost + *predict(AlgorithmId::ring, K::reduce_scatter, l.size, d.top_bytes, l.cost) +
             *predict(AlgorithmId::ring, K::allgather, l.size, d.top_bytes, l.cost);
    d.top_bytes /= l.size;
  }
  return d;
}

Descent leader_descent(CollectiveKind kind, const std::vector<LevelCost>& levels, double bytes) {
  Descent d;
  d.top_bytes = bytes;
  const bool reduces = kind == K::allreduce || kind == K::reduce_scatter;
  // reduce_scatter and allgather move the whole world's vector through the leaders.
  for (std::size_t i = 0; i + 1 < levels.size(); ++i) {
    const auto& l = levels[i];
    if (kind != K::broadcast)
      d.cost = d.cost + best_flat(reduces ? K::reduce : K::allgather, l.size, bytes, l.cost).cost;
    d.cost = d.cost + best_flat(K::broadcast, l.size, bytes, l.cost).cost;
  }
  return d;
}

Cost predict_leader(CollectiveKind kind, const std::vector<LevelCost>& levels, double bytes) {
  if (levels.empty()) return {};
  const LevelCost& top = levels.back();
  const bool reduces = kind == K::allreduce || kind == K::reduce_scatter;
  const Cost total = leader_descent(kind, levels, bytes).cost;
  const CollectiveKind at_top = kind == K::broadcast ? K::broadcast : reduces ? K::allreduce : K::allgather;
  return total + best_flat(at_top, top.size, bytes, top.cost).cost;
}

Cost predict_compressed(collectives::EncodedExchange how, int p, const collectives::EncodedShape& s,
                        const GroupCost& g) {
  const double q = p, N = s.dense_bytes, e = s.encoded_bytes;
  const double enc = s.encode_passes * g.gamma, dec = s.decode_passes * g.gamma;
  if (p <= 1) return Cost{0, 0, N * (enc + dec)};
  const double sharing = s.sharing * g.wan_sharing;
  GroupCost lossy = g;
  lossy.link = priced_with_loss(g.link, e);
  const GroupCost& gl = lossy;
  if (how == collectives::EncodedExchange::gather || p == 2) {
    // One round of p - 1 messages posted at once; every member decodes all p encodings.
    return Cost{gl.link.alpha + (q - 2) * gl.link.gap, (q - 1) * e * gl.link.beta * sharing, N * enc + q * N * dec};
  }
  // Ranges to their owners and the owners' sums back: two rounds of p - 1 messages, one
  // encoding's (p - 1)/p each way. Encoding the ranges, then the owner's re-encoding of
  // its range; decoding p contributions to that range, then the p sums.
  const double f = (q - 1) / q;
  return Cost{2 * (gl.link.alpha + (q - 2) * gl.link.gap), 2 * f * e * gl.link.beta * sharing,
              N * (1 + 1 / q) * enc + 2 * N * dec};
}

collectives::EncodedExchange best_exchange(int p, const collectives::EncodedShape& s, const GroupCost& g) {
  using E = collectives::EncodedExchange;
  if (p <= 2) return E::gather;
  return predict_compressed(E::gather, p, s, g).total() <= predict_compressed(E::reduce_scatter, p, s, g).total()
             ? E::gather
             : E::reduce_scatter;
}

LinkClass classify(const std::vector<Locality>& members) {
  LinkClass c = LinkClass::shm;
  if (members.empty()) return c;
  const auto& f = members.front();
  for (const auto& m : members) {
    if (m.region != f.region) return LinkClass::wan;
    if (m.cluster != f.cluster || m.rack != f.rack || m.host != f.host) c = LinkClass::net;
  }
  return c;
}

LinkClass level_class(Level l) {
  switch (l) {
    case Level::host: return LinkClass::shm;
    case Level::rack:
    case Level::cluster: return LinkClass::net;
    case Level::region: return LinkClass::wan;
  }
  return LinkClass::net;
}

}  // namespace strata::topology
