#include "probe/probe.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "kernels/reduce.hpp"
#include "base/log.hpp"
#include "probe/figures_cache.hpp"
#include "strata/errors.hpp"
#include "transport/tags.hpp"

namespace strata::probe {

using namespace topology;

namespace {

using transport::Clock;
using Seconds = std::chrono::duration<double>;

constexpr std::size_t kSmall = 8;          // bytes: the flag word alone, so α
constexpr std::size_t kLadder = 1 << 10;   // bytes: the first rung of the bandwidth ladder
constexpr std::size_t kLarge = 1 << 20;    // bytes: its top, enough that β dominates on every link
constexpr int kMaxSmall = 200, kMaxLarge = 16;
// A burst: this many small messages posted at once, each answered.
constexpr int kBurst = 8;
// The first word of every probe message: whether the responder answers it or stops.
constexpr std::uint64_t kStop = 0, kEcho = 1;


// Probe messages use collective tags with sequence numbers counted down from the top:
// they are all consumed before the communicator runs its first collective, whose
// numbers start at 0.
transport::Tag probe_tag(std::size_t pair_index, transport::Channel ch = transport::Channel::data) {
  return transport::collective_tag(transport::kSeqMask - pair_index, ch);
}
// The fan-out phase of a session (below) runs on its own channel.
constexpr transport::Channel kFanOut = transport::Channel::data2;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void wait_or_throw(transport::Transport& t, const transport::RequestPtr& r, Clock::time_point deadline,
                   int peer) {
  if (!transport::wait(t, r, deadline))
    throw TimeoutError(transport::with_trouble(
        t, "link probing on rank " + std::to_string(t.rank()) + ": rank " + std::to_string(peer) +
               " did not answer before the communicator's creation deadline (STRATA_TIMEOUT_S)"));
}

// `count` round trips of `bytes` from the initiator, all posted at once, the responder
// answering each in turn; returns the seconds until the last answer. With count 1 a plain
// ping-pong; with more, each further message adds one trip through both ranks' stacks.
double round_trip(transport::Transport& t, int peer, transport::Tag tag, std::vector<char>& out,
                  std::vector<char>& in, std::size_t bytes, Clock::time_point deadline, int count = 1) {
  std::memcpy(out.data(), &kEcho, sizeof kEcho);
  const auto start = Clock::now();
  std::vector<transport::RequestPtr> recvs, sends;
  // Small answers land side by side; a large one has the buffer to itself (count is 1).
  for (int i = 0; i < count; ++i)
    recvs.push_back(t.irecv(peer, tag, in.data() + static_cast<std::size_t>(i) * kSmall,
                            in.size() - static_cast<std::size_t>(i) * kSmall));
  for (int i = 0; i < count; ++i) sends.push_back(t.isend(peer, tag, out.data(), bytes));
  for (const auto& s : sends) wait_or_throw(t, s, deadline, peer);
  for (const auto& r : recvs) wait_or_throw(t, r, deadline, peer);
  return Seconds(Clock::now() - start).count();
}

// `measuring`, if given, receives the seconds spent after the warm-up: what the budget bounds.
PairResult initiate(transport::Transport& t, const ProbePair& p, std::size_t index, Seconds budget,
                    Clock::time_point deadline, double* measuring = nullptr) {
  const auto tag = probe_tag(index);
  std::vector<char> out(kLarge, 0), in(kLarge, 0);
  std::vector<double> small, large;
  // The first round trip is a warm-up (connection setup, first page faults) and also
  // waits for the responder to finish the pairs before this one: it is dropped, and the
  // pair's budget starts after it. A pair measured from that wait alone once took 45 ms
  // of "latency" on a link with 0.05 ms.
  const double first = round_trip(t, p.to, tag, out, in, kSmall, deadline);
  const auto start = Clock::now();
  auto elapsed = [&] { return Seconds(Clock::now() - start); };
  // Single messages and bursts in turn, so each burst is set against a single message
  // sent under the same load: their difference is what the further messages added (the
  // gap). A session of three ranks or more replaces it with a fan-out (agree_figures).
  std::vector<double> extra;
  while (static_cast<int>(small.size()) < kMaxSmall && (small.empty() || elapsed() < budget * 0.4)) {
    const double one = round_trip(t, p.to, tag, out, in, kSmall, deadline);
    small.push_back(one);
    if (elapsed() < budget * 0.4)
      extra.push_back(round_trip(t, p.to, tag, out, in, kSmall, deadline, kBurst) - one);
  }
  if (small.empty()) small.push_back(first);
  const double est_small = median(small);
  // Bandwidth: messages doubling from 1 KiB while the next one's round trip, as the last
  // one predicts it, fits in what is left of the budget; then the largest that fits,
  // again. A fast link climbs to 1 MiB; a slow or far one stops at what its budget
  // allows (a 1 MiB round trip at 100 kbit/s takes 170 s). One rung at least whenever one
  // more round trip fits in what is left, on every class: a small round trip slowed by a
  // loaded host once left a loopback pair past half its share with no bandwidth figure.
  // Where it does not fit (a far link whose round trip is the share's size), a 1 KiB rung
  // would show bandwidth only where that is so low that the rung alone takes several
  // budgets (100 kbit/s: 160 ms each way); across regions the WAN link's own measure of
  // its streams takes over once calls run (wan_path).
  std::size_t rung = kLadder, measured_rung = 0;
  const bool climb = est_small < (budget - elapsed()).count();
  while (climb && static_cast<int>(large.size()) < kMaxLarge && (measured_rung == 0 || elapsed() < budget)) {
    const double rt = round_trip(t, p.to, tag, out, in, rung, deadline);
    if (rung != measured_rung) large.clear();  // β from the largest rung alone
    measured_rung = rung;
    large.push_back(rt);
    const double beta = std::max(1e-13, (rt - est_small) / 2 / static_cast<double>(rung - kSmall));
    const std::size_t next = std::min(rung * 2, kLarge);
    const double left = (budget - elapsed()).count();
    if (next > rung && est_small + 2 * static_cast<double>(next) * beta <= left) rung = next;
    else if (rt > left) break;
  }
  if (measuring) *measuring += elapsed().count();
  std::memcpy(out.data(), &kStop, sizeof kStop);
  wait_or_throw(t, t.isend(p.to, tag, out.data(), kSmall), deadline, p.to);

  PairResult r;
  r.pair = p;
  r.small_iters = static_cast<int>(small.size());
  r.large_iters = static_cast<int>(large.size());
  r.cost.alpha = est_small / 2;
  if (!extra.empty()) {
    r.cost.gap = std::max(0.0, median(extra) / (kBurst - 1));
    r.gap_measured = true;
  }
  // Only where the rung's bytes showed above the latency (a fifth of the round trip at
  // least): a rung that a far link's budget cut short at a few KiB times its round trip,
  // not its bandwidth, and β keeps its built-in or file figure instead of noise.
  if (!large.empty() && median(large) - est_small > 0.2 * est_small) {
    // One way: half the round trip, less the latency both sizes pay.
    r.cost.beta = std::max(1e-13, (median(large) - est_small) / 2 / static_cast<double>(measured_rung - kSmall));
    r.beta_measured = true;
  }
  return r;
}

// Answers `from` on `tag` until it says stop.
void respond(transport::Transport& t, int from, transport::Tag tag, Clock::time_point deadline) {
  std::vector<char> buf(kLarge, 0);
  // Answers are not waited for one by one: a send over the WAN link completes only when
  // acknowledged, and waiting would add a round trip per message of a burst that a
  // collective posting several messages never pays. Each answer keeps its own copy.
  std::vector<std::pair<transport::RequestPtr, std::vector<char>>> answers;
  for (;;) {
    auto r = t.irecv(from, tag, buf.data(), buf.size());
    wait_or_throw(t, r, deadline, from);
    std::uint64_t flag = kStop;
    std::memcpy(&flag, buf.data(), sizeof flag);
    if (flag == kStop) break;
    std::erase_if(answers, [](const auto& a) { return a.first->done() && a.first->error().empty(); });
    answers.emplace_back(nullptr, std::vector<char>(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(r->bytes())));
    auto& a = answers.back();
    a.first = t.isend(from, tag, a.second.data(), a.second.size());
  }
  for (const auto& a : answers) wait_or_throw(t, a.first, deadline, from);
}

// The gap: a round trip to each of `peers` at once, as a direct or tree round posts its
// messages, set against a round trip to the first peer alone just before it (the same
// load on the host), the difference spread over the further peers; the median within
// `budget`.
double fan_out_gap(transport::Transport& t, const std::vector<int>& peers, transport::Tag tag, Seconds budget,
                   Clock::time_point deadline) {
  const std::size_t k = peers.size();
  std::vector<char> in(k * kSmall, 0);
  const auto start = Clock::now();
  auto round = [&](std::size_t n) {
    const auto t0 = Clock::now();
    std::vector<transport::RequestPtr> reqs;
    for (std::size_t i = 0; i < n; ++i) reqs.push_back(t.irecv(peers[i], tag, in.data() + i * kSmall, kSmall));
    for (std::size_t i = 0; i < n; ++i) reqs.push_back(t.isend(peers[i], tag, &kEcho, sizeof kEcho));
    for (std::size_t i = 0; i < reqs.size(); ++i) wait_or_throw(t, reqs[i], deadline, peers[i % n]);
    return Seconds(Clock::now() - t0).count();
  };
  round(k);  // warm-up: the first message to a peer may set up its connection
  std::vector<double> extra;
  while (static_cast<int>(extra.size()) < kMaxSmall && (extra.empty() || Seconds(Clock::now() - start) < budget)) {
    const double one = round(1);
    extra.push_back((round(k) - one) / static_cast<double>(k - 1));
  }
  for (int peer : peers) wait_or_throw(t, t.isend(peer, tag, &kStop, sizeof kStop), deadline, peer);
  return std::max(0.0, median(extra));
}

// Everything that changes what probing would find: the ranks' places, the fabric and
// the settings that shape it.
std::string full_cache_key(const ProbeInputs& in) {
  std::string k = "size=" + std::to_string(in.size) + " " + in.cache_key;
  for (const auto& l : *in.localities) k += "\n" + l.region + "/" + l.cluster + "/" + l.rack + "/" + l.host;
  return k;
}

// Pairs a topology file already describes need no probing.
bool file_covers(const TopologyFile* f, const ProbePair& p, const std::vector<std::string>& regions) {
  if (!f) return false;
  switch (p.cls) {
    case LinkClass::shm: return f->host.has_value();
    case LinkClass::net: return f->rack.has_value() || f->cluster.has_value();
    case LinkClass::wan:
      return f->wan_link(regions[static_cast<std::size_t>(p.region_a)], regions[static_cast<std::size_t>(p.region_b)]) !=
             nullptr;
  }
  return false;
}

}  // namespace

double measure_gamma() {
  static std::once_flag once;
  static double gamma = 0;
  std::call_once(once, [] {
    constexpr std::size_t n = (2u << 20) / sizeof(float);  // 2 MiB per buffer
    std::vector<float> a(n, 1.0f), b(n, 2.0f), out(n, 0.0f);
    double best = 0;
    for (int i = 0; i < 4; ++i) {  // the first pass faults the pages in
      const auto start = Clock::now();
      kernels::reduce(DataType::f32, ReduceOp::sum, out.data(), a.data(), b.data(), n);
      const double t = Seconds(Clock::now() - start).count();
      if (i > 0 && (best == 0 || t < best)) best = t;
    }
    gamma = best / static_cast<double>(n * sizeof(float));
  });
  return gamma;
}

Figures agree_figures(const ProbeInputs& in, ProbeReport* report) {
  const auto start = Clock::now();
  ProbeReport local;
  ProbeReport& rep = report ? *report : local;
  rep.budget_s = in.budget_s;
  Figures f = default_figures();
  set_regions(f, region_order(*in.localities));
  auto finish = [&](Figures& figs) {
    if (in.file) apply_file(figs, *in.file);
    rep.seconds = Seconds(Clock::now() - start).count();
    return figs;
  };

  const bool enabled = in.enabled;
  if (!enabled) {
    rep.how = ProbeReport::How::skipped;
    rep.why = "STRATA_PROBE=0";
    return finish(f);
  }
  std::vector<ProbePair> pairs;
  for (const auto& p : probe_pairs(*in.localities))
    if (!file_covers(in.file, p, f.regions)) pairs.push_back(p);

  if (in.size == 1) {
    rep.how = ProbeReport::How::probed;
    rep.measured.gamma = measure_gamma();
    apply_measured(f, rep.measured, Source::probed);
    return finish(f);
  }

  // Rank 0 decides for everyone: figures from its cache, its parent communicator's, or a
  // fresh probe with its γ. Ranks a grow brings in have no parent: they read them here too.
  const std::string key = full_cache_key(in);
  const std::string path = cache_path(key);
  const double max_age = in.cache_max_age_s;
  if (in.rank == 0) {
    std::string decision;
    if (max_age > 0)
      if (const auto cached = read_cache(path, key, max_age)) decision = "cached\n" + serialize(*cached);
    if (decision.empty() && in.inherited)
      if (const auto carried = carry_over(in.inherited->measured, in.inherited->regions, pairs, f.regions))
        decision = "inherited\n" + serialize(*carried);
    if (decision.empty()) {
      Measured m;
      m.gamma = measure_gamma();
      decision = "probe\n" + serialize(m);
    }
    in.store->set("probe/decision", decision);
  }
  const std::string decision = in.store->get("probe/decision", in.deadline);
  const auto nl = decision.find('\n');
  const std::string how = decision.substr(0, nl);
  const auto head = parse_measured(decision.substr(nl + 1));
  if (!head) throw TransportError("link probing: rank 0 published figures this rank cannot read");

  if (how == "cached" || how == "inherited") {
    rep.how = how == "cached" ? ProbeReport::How::cached : ProbeReport::How::inherited;
    rep.why = how == "cached" ? path : "the figures of the communicator it was made from";
    rep.measured = *head;
    apply_measured(f, rep.measured, how == "cached" ? Source::cached : Source::probed);
    return finish(f);
  }

  // Every pair in list order, each rank taking part in its own; the budget is shared.
  const double budget_s = in.budget_s;
  const Seconds per_pair(pairs.empty() ? budget_s : budget_s / static_cast<double>(pairs.size()));
  // A session: the pair (and its companions) ping-pong; then, when the session has three
  // ranks or more, the pair's first rank sends to all the others at once, which is what
  // a further message costs in a direct or tree round (the gap), better than a burst to
  // one peer that the stack may coalesce.
  double measuring = 0;  // this rank's own pairs, after each pair's warm-up
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    std::vector<int> fan{p.to};
    for (const auto& [a, b] : p.companions)
      for (int r : {a, b})
        if (r != p.from) fan.push_back(r);
    const bool fans = fan.size() >= 2;
    const Seconds ping_pong = fans ? per_pair * 0.75 : per_pair;
    if (p.from == in.rank) {
      PairResult r = initiate(*in.transport, p, i, ping_pong, in.deadline, &measuring);
      if (fans) {
        const auto fan_start = Clock::now();
        r.cost.gap = fan_out_gap(*in.transport, fan, probe_tag(i, kFanOut), per_pair - ping_pong, in.deadline);
        measuring += Seconds(Clock::now() - fan_start).count();
        r.gap_measured = true;
      }
      in.store->set("probe/pair/" + std::to_string(i), serialize(Measured{0, {r}}));
    } else if (p.to == in.rank) {
      respond(*in.transport, p.from, probe_tag(i), in.deadline);
    }
    for (const auto& [a, b] : p.companions) {
      ProbePair c = p;
      c.from = a;
      c.to = b;
      if (a == in.rank) initiate(*in.transport, c, i, ping_pong, in.deadline);  // load, not a figure
      if (b == in.rank) respond(*in.transport, a, probe_tag(i), in.deadline);
    }
    if (fans && p.from != in.rank && std::find(fan.begin(), fan.end(), in.rank) != fan.end())
      respond(*in.transport, p.from, probe_tag(i, kFanOut), in.deadline);
  }
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < pairs.size(); ++i) keys.push_back("probe/pair/" + std::to_string(i));
  Measured m = *head;
  if (!keys.empty())
    for (const auto& v : in.store->get(keys, in.deadline)) {
      const auto one = parse_measured(v);
      if (!one || one->pairs.size() != 1) throw TransportError("link probing: a rank published unreadable figures");
      m.pairs.push_back(one->pairs.front());
    }
  rep.how = ProbeReport::How::probed;
  rep.measuring_s = measuring;
  rep.measured = m;
  apply_measured(f, m, Source::probed);
  if (in.rank == 0 && max_age > 0) write_cache(path, key, m);
  if (in.rank == 0) {
    const double took = Seconds(Clock::now() - start).count();
    // The budget bounds the measuring; each pair's first round trip (it sets up the
    // connection, several round trips across a WAN) and the store's exchanges are not
    // in it. A pair whose round trip is larger than its share takes one small round trip
    // and no more, so the measuring may pass the budget by one round trip at most.
    char line[320];
    std::snprintf(line, sizeof line,
                  "link probing: %zu pair(s) in %.3f s: rank 0 measured for %.3f s, budget %.3f s (STRATA_PROBE_MS)%s; "
                  "the rest set up connections and agreed",
                  pairs.size(), took, measuring, budget_s,
                  measuring <= budget_s * 1.05 ? ", kept to it" : ", over it by its slowest pair's round trip");
    log::info(line);
  }
  return finish(f);
}

}  // namespace strata::probe
