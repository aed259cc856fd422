// Online refinement of the selector's choice from the collectives' own timings, so that a
// probe taken at a bad moment (a busy host, a spinning ping-pong far cheaper than a real
// collective step) cannot fix a slow choice for the communicator's life.
//
// Per collective and power-of-two size bucket of the world group, the few algorithms the
// model ranks within `within` of its best (and all it cannot tell from its best, and its
// picks were the probe's α ten times off) are tried in streaks: each candidate runs one
// untimed call then `streak` timed ones in a row, all candidates in turn, and again until
// each has `samples` timed calls. The untimed call absorbs how unevenly the previous
// candidate let the ranks go; inside a streak that unevenness is the candidate's own, as
// in a loop of it. Taking turns lets drift in the host's load hit the candidates alike.
//
// A call is timed from when its last rank started it to when its last rank finished it,
// on one clock: each rank's own start-to-end time is mostly how long it waited for the
// others to arrive (on a busy host, tens of µs either way around a call of a few), and
// the rank that arrives last skips the hop that brings its data to the others. Every rank
// hands its start and end of each timed call to rank 0, which puts them on its clock,
// takes per candidate the mean of its faster half of calls, and answers all ranks
// alike; the bucket keeps the fastest from then on, or the model's pick unless another
// beat it by 10%. Explore, then commit: the cost is a few dozen calls per size, once;
// Horovod's autotune does the same with Bayesian search over its knobs.
//
// Every rank must call next() for the same calls in the same order (collectives are
// issued in one order on every rank), so all pick the same algorithm without talking.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "topology/selector.hpp"

namespace strata::topology {

class Tuner {
 public:
  struct Options {
    int samples = 6;          // timed calls per candidate
    int streak = 3;           // ... of which this many in a row, after an untimed one
    double within = 4.0;      // candidates: predicted within this factor of the model's best
    int max_candidates = 3;   // ... at most this many, besides ties (below)
    // Algorithms predicted within this factor of the model's best are all tried, however
    // many: the model cannot order them (a β-bound tie of ring, halving-doubling and
    // direct, say), so its order would decide which of them are never measured.
    double tie = 1.05;
    // The probe's α is the figure likeliest to be wrong (a spinning ping-pong far cheaper
    // than a collective's step, a busy host far dearer), and an error in it reorders the
    // algorithms by their rounds: the model's pick with α this many times larger, and
    // with it this many times smaller, are tried too. 1 turns it off.
    double alpha_doubt = 10;
  };

  Tuner(const Selector& selector, Options o);
  // The exploration's calls per candidate: its samples and an untimed call per streak.
  static int calls_per_candidate(const Options& o) { return o.samples + (o.samples + o.streak - 1) / o.streak; }

  // The algorithm for the next call of this collective over g, or nullptr where the tuner
  // has no say (a STRATA_ALGO rule decides, or the model leaves one candidate). Counts
  // the call: record() must follow it once the call is done.
  const collectives::Algorithm* next(CollectiveKind kind, DataType dt, std::size_t count, const collectives::Group& g);
  // This rank's clock (seconds) when the call next() just picked started and ended.
  void record(CollectiveKind kind, std::uint64_t bytes, double start, double end);
  // Once the bucket has run all its calls: this rank's start and end of each timed call,
  // in order (start, end, start, end, ...), for judge() on one rank. Nothing while still
  // exploring or settled.
  std::optional<std::vector<double>> offer(CollectiveKind kind, std::uint64_t bytes) const;
  // Each candidate's time from every rank's offer, all put on one clock: per call the last
  // end less the last start, per candidate the mean of its faster half of calls.
  std::vector<double> judge(CollectiveKind kind, std::uint64_t bytes, const std::vector<std::vector<double>>& offers) const;
  // judge()'s per-call times, per candidate in the order they ran (STRATA_DEBUG=TRACE prints them).
  std::vector<std::vector<double>> call_times(CollectiveKind kind, std::uint64_t bytes,
                                              const std::vector<std::vector<double>>& offers) const;
  // How many candidates the bucket tries (the length of judge()'s answer); 0 if none.
  std::size_t candidates(CollectiveKind kind, std::uint64_t bytes) const;
  void settle(CollectiveKind kind, std::uint64_t bytes, const std::vector<double>& agreed);

  // What was learned, one line per bucket tried: candidates and their agreed times, the
  // winner against the model's pick; equal on every rank once settled.
  std::string report() const;
  // report()'s line for one bucket ("" if it has none).
  std::string describe(CollectiveKind kind, std::uint64_t bytes) const;
  // Buckets settled so far (tests).
  int settled() const;

 private:
  struct Turn {
    int candidate;
    bool timed;
  };
  struct Bucket {
    std::vector<collectives::AlgorithmId> candidates;  // model's order: [0] is its pick
    std::vector<Turn> schedule;                       // the exploration's calls in order
    std::vector<double> stamps;                       // this rank's start, end of each timed call
    std::vector<int> timed;                           // ... and its candidate
    int calls = 0;                                    // calls picked so far
    int last = -1;                                    // candidate of the call in flight
    bool last_timed = false;
    std::vector<double> agreed;                       // judge()'s times, once settled
    std::optional<std::size_t> winner;
  };
  std::vector<Turn> schedule(int candidates) const;
  std::string line(const std::pair<int, int>& key, const Bucket& b) const;
  Bucket* find(CollectiveKind kind, std::uint64_t bytes);
  const Bucket* find(CollectiveKind kind, std::uint64_t bytes) const;

  const Selector& selector_;
  Options opt_;
  std::map<std::pair<int, int>, Bucket> buckets_;  // (kind, size bucket)
};

}  // namespace strata::topology
