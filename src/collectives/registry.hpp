// Every flat algorithm by name: what it can run and how to run it over one Group. The
// threshold rule in dispatch.cpp and the cost-model selector (topology/selector.hpp)
// pick from this list; CallOptions::algorithm names one of its entries directly. The
// compressed allreduce is listed too, but only a call's compression chooses it
// (core/call_plan.cpp): its supports() answers no to every plain call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "collectives/dispatch.hpp"

namespace strata::collectives {

enum class AlgorithmId : std::uint8_t {
  ring, recursive_doubling, binomial, chain, halving_doubling, double_tree, direct, dissemination,
  param_server, exchange, shared_memory, compressed
};

struct Algorithm {
  AlgorithmId id;
  const char* name;         // what CallOptions::algorithm and strata-perf --algo accept
  const char* description;  // one line: shape, and where it is meant to win
  // Whether run() carries out this collective correctly for these arguments: a question
  // of capability only. Which one is fastest is the selector's business. count is the
  // per-rank count as in CollArgs.
  bool (*supports)(CollectiveKind kind, DataType dt, std::size_t count, GroupShape group);
  // Runs the collective over g; all ranks of g call it with the same arguments.
  Steps (*run)(Context& ctx, const Group& g, const CollArgs& a);
};

// Algorithms whose code lives in a layer above this one (quant/'s compressed allreduce)
// are listed here like the rest, and run what that layer installs when a communicator
// is first made; until then running one throws std::logic_error.
using RunFn = Steps (*)(Context& ctx, const Group& g, const CollArgs& a);
void install(AlgorithmId id, RunFn run);

// In AlgorithmId order.
std::span<const Algorithm> algorithms();
const Algorithm& algorithm(AlgorithmId id);
// nullptr for a name that is not registered.
const Algorithm* find_algorithm(std::string_view name);
// "ring, recursive_doubling, ...": every name, or those that support the arguments.
std::string algorithm_names();
std::string algorithm_names(CollectiveKind kind, DataType dt, std::size_t count, GroupShape group);

}  // namespace strata::collectives
