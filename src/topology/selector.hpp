// The algorithm selector (DESIGN §4 step 2): for every collective, group shape and
// message size, the registered algorithms ranked by the cost model; the call takes the
// fastest one whose supports() accepts it. STRATA_ALGO's rules come first.
//
// A selector is built once per communicator from figures every rank agreed on (probe.cpp)
// and never changes, so every rank of a group picks the same algorithm without talking.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/dispatch.hpp"
#include "collectives/registry.hpp"
#include "topology/algorithm_rules.hpp"
#include "topology/cost_model.hpp"

namespace strata::topology {

struct Score {
  collectives::AlgorithmId algorithm;
  Cost cost;
};

// One (collective, group shape) ranked at every power-of-two size: bucket b holds sizes
// in (2^(b-1), 2^b] (bucket 0: 0 and 1 byte), ranked as at 2^b; the last bucket runs on
// to any size. Sizes are message_bytes() of the call.
struct ScoreTable {
  static constexpr int kBuckets = 41;  // up to 1 TiB
  CollectiveKind kind = CollectiveKind::allreduce;
  LinkClass link_class = LinkClass::net;
  int group_size = 1;
  GroupCost cost;
  std::vector<std::vector<Score>> ranked;  // per bucket, fastest first

  static int bucket(std::uint64_t bytes);
  static std::uint64_t bucket_top(int b) { return std::uint64_t{1} << b; }
  const std::vector<Score>& at(std::uint64_t bytes) const { return ranked[static_cast<std::size_t>(bucket(bytes))]; }

  // Consecutive buckets with the same winner, for printing: [lo, hi] and the bucket
  // whose ranking represents them (the last one).
  struct Range {
    std::uint64_t lo = 0, hi = 0;
    int first_bucket = 0, last_bucket = 0;
  };
  std::vector<Range> ranges() const;
};

ScoreTable build_score_table(CollectiveKind kind, LinkClass cls, int p, const GroupCost& cost);

class Selector final : public collectives::Chooser {
 public:
  // localities: every rank's, indexed by rank; rules: STRATA_ALGO's.
  Selector(Figures figures, std::vector<Locality> localities, AlgorithmRules rules);

  // Builds the tables of every collective for this group's shape now, so choose() only
  // looks them up (the communicator adds the world and its plan's groups).
  void add_group(const collectives::Group& g);

  // The algorithm for this call over g: the first STRATA_ALGO rule that matches and
  // supports it, else the fastest by the table that supports it (an algorithm that
  // declines hands the call to the next best).
  const collectives::Algorithm& choose(CollectiveKind kind, DataType dt, std::size_t count,
                                       const collectives::Group& g) const;
  const collectives::Algorithm& choose(const collectives::Group& g, const collectives::CollArgs& a) const override {
    return choose(a.kind, a.dtype, a.count, g);
  }

  // A lossy allreduce's exchange over g: STRATA_COMPRESSED_EXCHANGE's when it names one,
  // else the model's best_exchange at g's links.
  collectives::EncodedExchange encoded_exchange(const collectives::Group& g,
                                                const collectives::EncodedShape& s) const override;
  void force_exchange(std::optional<collectives::EncodedExchange> e) { forced_exchange_ = e; }

  // The model's ranking for this call over g, fastest first, of the algorithms that
  // support it; STRATA_ALGO's rules play no part (the tuner asks, after checking them).
  std::vector<Score> ranking(CollectiveKind kind, DataType dt, std::size_t count, const collectives::Group& g) const;

  LinkClass group_class(const collectives::Group& g) const;
  GroupCost group_cost(const collectives::Group& g) const;
  GroupCost class_cost(LinkClass c) const;

  const Figures& figures() const { return figures_; }
  const AlgorithmRules& rules() const { return rules_; }
  const std::vector<ScoreTable>& tables() const { return tables_; }

  // One line per table and size range, "allreduce shm p=4 0-32k recursive_doubling ...":
  // equal on every rank exactly when their choices are equal (tests compare it).
  std::string digest() const;

 private:
  const ScoreTable* find(CollectiveKind kind, int p, const GroupCost& cost) const;
  // group_cost() of a registered group without classifying its members again: a flat
  // communicator asks for the world's on every call.
  GroupCost cost_of(const collectives::Group& g) const;

  Figures figures_;
  std::vector<Locality> localities_;
  AlgorithmRules rules_;
  std::vector<ScoreTable> tables_;
  std::vector<std::pair<std::vector<int>, GroupCost>> known_;  // registered groups' ranks
  std::optional<collectives::EncodedExchange> forced_exchange_;
};

// The first algorithm of `ranked` that supports the call, else any registered one that
// does (the table only lists algorithms that implement the collective).
const collectives::Algorithm& first_supported(const std::vector<Score>& ranked, CollectiveKind kind,
                                              DataType dt, std::size_t count, collectives::GroupShape group);

// Why the winner of `ranked` won, in one line: what bounds it and by how much it beats
// the next ("α-bound (α 81%, β 17%, γ 2%); 1.9x ahead of ring").
std::string explain(const std::vector<Score>& ranked);

}  // namespace strata::topology
