// The one override grammar for algorithm choice, shared by STRATA_ALGO and the per-call
// CallOptions::algorithm:
//
//   spec  := rule ('#' rule)*
//   rule  := plan | [collective ':'] [range ':'] algorithm
//   plan  := auto | hier | flat                 (STRATA_ALGO only: the hierarchical plan)
//   collective := allreduce | reduce_scatter | allgather | broadcast | reduce | barrier | all
//                 (nccl-tests spellings all_reduce, all_gather, bcast too)
//   range := size '-' (size | inf)              inclusive; sizes as nccl-tests' size column
//   size  := digits [k | m | g]                 binary multiples, either case
//   algorithm := a registered name | tree (double_tree) | auto (the selector decides)
//
// e.g. "allreduce:0-64k:tree#64k-inf:ring". A rule without a collective applies to the
// previous rule's (the first one's to every collective), so the example's second rule is
// about allreduce too. The first rule that matches a call decides it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/registry.hpp"
#include "strata/types.hpp"

namespace strata::topology {

// STRATA_ALGO's plan words; hierarchy::Choice mirrors them.
enum class PlanChoice { automatic, hierarchical, flat };

struct AlgorithmRule {
  std::optional<CollectiveKind> kind;  // none: every collective
  std::uint64_t lo = 0;                // bytes, inclusive
  std::uint64_t hi = UINT64_MAX;       // bytes, inclusive
  const collectives::Algorithm* algorithm = nullptr;  // nullptr: the selector's choice
  std::string text;                    // the rule as written, for messages

  bool matches(CollectiveKind k, std::uint64_t bytes) const {
    return (!kind || *kind == k) && bytes >= lo && bytes <= hi;
  }
};

struct AlgorithmRules {
  std::optional<PlanChoice> plan;  // set when a rule was a plan word
  std::vector<AlgorithmRule> rules;

  // The first rule matching the call, or nullptr.
  const AlgorithmRule* match(CollectiveKind k, std::uint64_t bytes) const;
  bool empty() const { return rules.empty(); }
};

// `what` names the source in errors ("STRATA_ALGO", "algorithm"); allow_plan accepts the
// plan words. Throws InvalidArgument naming the rule and the token that does not parse.
AlgorithmRules parse_algorithm_rules(std::string_view spec, const char* what, bool allow_plan);

// A collective as the grammar spells it (allreduce, all_reduce, bcast, ...); nullopt for
// an unknown word and for "all".
std::optional<CollectiveKind> parse_collective_name(std::string_view name);

// A registered algorithm by name, with the aliases the grammar accepts ("tree").
const collectives::Algorithm* find_algorithm_alias(std::string_view name);

// The size a rule's range is compared with: nccl-tests' size column, i.e. the whole
// vector, or for reduce_scatter and allgather all ranks' blocks together.
std::uint64_t message_bytes(CollectiveKind kind, std::size_t count, DataType dt, int group_size);

// "64k", "1m", "1536", "inf": the inverse of the grammar's sizes, for printing rules.
std::string format_size(std::uint64_t bytes);

// CallOptions::algorithm resolved for one call: nullptr (automatic) when the spec is empty
// or no rule matches; the matching rule's algorithm otherwise. Throws InvalidArgument when
// the spec does not parse or the algorithm it names does not support the call.
const collectives::Algorithm* resolve_call_algorithm(const std::string& spec, CollectiveKind kind,
                                                     DataType dt, std::size_t count, collectives::GroupShape group);

}  // namespace strata::topology
