// Online refinement of the selector's choice from the collectives' own timings, so that a
// probe taken at a bad moment (a busy host, a spinning ping-pong far cheaper than a real
// collective step) cannot fix a slow choice for the communicator's life.
//
// Per collective and power-of-two size bucket of the world group, the few algorithms the
// model ranks within `within` of its best (and all it cannot tell from its best, and its
// picks were the probe's α ten times off) are tried in turn: one untimed round (warm-up),
// then `samples` timed calls each, interleaved so that drift in the host's load hits
// them alike. Each rank then offers its mean per candidate without its slowest sample;
// the communicator keeps the largest over the ranks (a collective is done when its last
// rank is; rank 0 gathers and answers, so all hold the same bits) and the bucket keeps
// the fastest from then on, or the model's pick unless another beat it by 10%. Explore,
// then commit: the cost is a few dozen calls per size, once; Horovod's autotune does the
// same with Bayesian search over its knobs.
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

  // The algorithm for the next call of this collective over g, or nullptr where the tuner
  // has no say (a STRATA_ALGO rule decides, or the model leaves one candidate). Counts
  // the call: record() must follow it once the call is done.
  const collectives::Algorithm* next(CollectiveKind kind, DataType dt, std::size_t count, const collectives::Group& g);
  // This rank's seconds for the call next() just picked.
  void record(CollectiveKind kind, std::uint64_t bytes, double seconds);
  // Once the bucket has run all its samples: this rank's time per candidate (the mean
  // without the slowest sample), to be agreed over the ranks (the largest) and handed to
  // settle(). Nothing while still exploring or settled.
  std::optional<std::vector<double>> offer(CollectiveKind kind, std::uint64_t bytes) const;
  void settle(CollectiveKind kind, std::uint64_t bytes, const std::vector<double>& agreed);

  // What was learned, one line per bucket tried: candidates and their agreed times, the
  // winner against the model's pick; equal on every rank once settled.
  std::string report() const;
  // report()'s line for one bucket ("" if it has none).
  std::string describe(CollectiveKind kind, std::uint64_t bytes) const;
  // Buckets settled so far (tests).
  int settled() const;

 private:
  struct Bucket {
    std::vector<collectives::AlgorithmId> candidates;  // model's order: [0] is its pick
    std::vector<std::vector<double>> times;           // per candidate, this rank's
    int calls = 0;                                    // calls picked so far
    int last = -1;                                    // candidate of the call in flight
    bool last_timed = false;
    std::vector<double> agreed;                       // the slowest rank's times, once settled
    std::optional<std::size_t> winner;
  };
  int explore_calls(const Bucket& b) const;
  std::string line(const std::pair<int, int>& key, const Bucket& b) const;
  Bucket* find(CollectiveKind kind, std::uint64_t bytes);
  const Bucket* find(CollectiveKind kind, std::uint64_t bytes) const;

  const Selector& selector_;
  Options opt_;
  std::map<std::pair<int, int>, Bucket> buckets_;  // (kind, size bucket)
};

}  // namespace strata::topology
