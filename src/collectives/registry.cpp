#include "collectives/registry.hpp"

#include <atomic>
#include <stdexcept>
#include <string>

#include "collectives/algorithms.hpp"

namespace strata::collectives {

namespace {

using K = CollectiveKind;

// Every algorithm handles every dtype, op, count (0 included) and group size; they
// differ only in the collectives they implement.
template <K... kinds>
bool only(CollectiveKind kind, DataType, std::size_t, GroupShape) {
  return ((kind == kinds) || ...);
}

// Only where dedicated servers exist to push to.
bool served(CollectiveKind kind, DataType, std::size_t, GroupShape g) {
  return g.servers > 0 && (kind == K::allreduce || kind == K::reduce_scatter);
}

Steps run_ring(Context& ctx, const Group& g, const CollArgs& a) {
  switch (a.kind) {
    case K::allreduce: return ring_allreduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
    case K::reduce_scatter: return ring_reduce_scatter(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
    case K::allgather: return ring_allgather(ctx, g, a.send, a.recv, a.count, a.dtype);
    default: return ring_reduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op, a.root);
  }
}

Steps run_recursive_doubling(Context& ctx, const Group& g, const CollArgs& a) {
  return recursive_doubling_allreduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
}

Steps run_binomial(Context& ctx, const Group& g, const CollArgs& a) {
  if (a.kind == K::broadcast) return binomial_broadcast(ctx, g, a.send, a.recv, a.count, a.dtype, a.root);
  return binomial_reduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op, a.root);
}

Steps run_chain(Context& ctx, const Group& g, const CollArgs& a) {
  return chain_broadcast(ctx, g, a.send, a.recv, a.count, a.dtype, a.root);
}

Steps run_halving_doubling(Context& ctx, const Group& g, const CollArgs& a) {
  switch (a.kind) {
    case K::allreduce: return halving_doubling_allreduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
    case K::reduce_scatter:
      return halving_doubling_reduce_scatter(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
    default: return halving_doubling_allgather(ctx, g, a.send, a.recv, a.count, a.dtype);
  }
}

Steps run_double_tree(Context& ctx, const Group& g, const CollArgs& a) {
  if (a.kind == K::broadcast) return double_tree_broadcast(ctx, g, a.send, a.recv, a.count, a.dtype, a.root);
  return double_tree_allreduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
}

Steps run_direct(Context& ctx, const Group& g, const CollArgs& a) {
  switch (a.kind) {
    case K::allreduce: return direct_allreduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
    case K::reduce_scatter: return direct_reduce_scatter(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
    default: return direct_allgather(ctx, g, a.send, a.recv, a.count, a.dtype);
  }
}

Steps run_param_server(Context& ctx, const Group& g, const CollArgs& a) {
  if (a.kind == K::reduce_scatter) return param_server_reduce_scatter(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
  return param_server_allreduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
}

Steps run_exchange(Context& ctx, const Group& g, const CollArgs& a) {
  if (a.kind == K::barrier) return exchange_barrier(ctx, g);
  return exchange_allreduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
}

// Only where every member maps the host's shared segment (one host, over UCX).
bool shared(CollectiveKind kind, DataType dt, std::size_t count, GroupShape g) {
  return g.shared_memory && only<K::allreduce, K::reduce_scatter, K::allgather>(kind, dt, count, g);
}

Steps run_shared_memory(Context& ctx, const Group& g, const CollArgs& a) {
  switch (a.kind) {
    case K::allreduce: return shared_memory_allreduce(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
    case K::reduce_scatter: return shared_memory_reduce_scatter(ctx, g, a.send, a.recv, a.count, a.dtype, a.op);
    default: return shared_memory_allgather(ctx, g, a.send, a.recv, a.count, a.dtype);
  }
}

Steps run_dissemination(Context& ctx, const Group& g, const CollArgs&) { return dissemination_barrier(ctx, g); }

// Chosen only by a call's compression, never for a plain call (settle_plan in core/).
bool never(CollectiveKind, DataType, std::size_t, GroupShape) { return false; }

std::atomic<RunFn> installed[static_cast<std::size_t>(AlgorithmId::compressed) + 1] = {};

template <AlgorithmId id>
Steps run_installed(Context& ctx, const Group& g, const CollArgs& a) {
  const RunFn run = installed[static_cast<std::size_t>(id)].load(std::memory_order_acquire);
  if (!run) throw std::logic_error("algorithm " + std::to_string(static_cast<int>(id)) + " has not been installed");
  return run(ctx, g, a);
}

constexpr Algorithm kAlgorithms[] = {
    {AlgorithmId::ring, "ring",
     "pipelined ring reduce-scatter + allgather; 2(p-1) steps, bandwidth-optimal for large messages",
     only<K::allreduce, K::reduce_scatter, K::allgather, K::reduce>, run_ring},
    {AlgorithmId::recursive_doubling, "recursive_doubling",
     "log2 p exchanges of the whole vector (pairs folded for non-powers of two); small messages",
     only<K::allreduce>, run_recursive_doubling},
    {AlgorithmId::binomial, "binomial",
     "binomial tree, whole vector per message, ceil(log2 p) rounds; small broadcasts and reduces",
     only<K::broadcast, K::reduce>, run_binomial},
    {AlgorithmId::chain, "chain",
     "pipelined chain from the root; large broadcasts",
     only<K::broadcast>, run_chain},
    {AlgorithmId::halving_doubling, "halving_doubling",
     "Rabenseifner: recursive halving reduce-scatter + recursive doubling allgather, 2 log2 p "
     "rounds at ring bandwidth; non-powers of two fold pairs first",
     only<K::allreduce, K::reduce_scatter, K::allgather>, run_halving_doubling},
    {AlgorithmId::double_tree, "double_tree",
     "two complementary binary trees, each reducing and broadcasting half the vector in "
     "pipelined chunks; log-depth latency",
     only<K::allreduce, K::broadcast>, run_double_tree},
    {AlgorithmId::direct, "direct",
     "colocated parameter server: each rank reduces its block from all others at once and "
     "sends it back; 2 rounds, p-1 concurrent flows",
     only<K::allreduce, K::reduce_scatter, K::allgather>, run_direct},
    {AlgorithmId::dissemination, "dissemination",
     "dissemination barrier, ceil(log2 p) rounds of empty messages",
     only<K::barrier>, run_dissemination},
    {AlgorithmId::param_server, "param_server",
     "dedicated server processes (STRATA_ROLE=server) each hold a shard: workers push, "
     "servers sum, workers pull; worker NICs carry the vector once each way",
     served, run_param_server},
    {AlgorithmId::exchange, "exchange",
     "one round: every rank sends its vector to all others and reduces all p in rank order; "
     "one latency at p-1 times the bytes, for small messages over long links (across regions); "
     "as a barrier, one message to every other rank",
     only<K::allreduce, K::barrier>, run_exchange},
    {AlgorithmId::shared_memory, "shared_memory",
     "processes of one host go through a segment they all map: each copies its piece into its "
     "slot, reduces its block from the peers' slots and copies the others' results out; a round "
     "of empty notices per step",
     shared, run_shared_memory},
    {AlgorithmId::compressed, "compressed",
     "allreduce through the call's lossy codec (CallOptions::compression, scope everywhere): "
     "two members swap encodings, more reduce one range each from everyone's encodings and "
     "send it back; what crosses links is encoded, never dense (quant/)",
     never, run_installed<AlgorithmId::compressed>},
};

// algorithm(id) indexes the table, so it must list every id once, in order.
constexpr bool ids_in_order() {
  for (std::size_t i = 0; i < std::size(kAlgorithms); ++i)
    if (static_cast<std::size_t>(kAlgorithms[i].id) != i) return false;
  return std::size(kAlgorithms) == static_cast<std::size_t>(AlgorithmId::compressed) + 1;
}
static_assert(ids_in_order());

}  // namespace

void install(AlgorithmId id, RunFn run) { installed[static_cast<std::size_t>(id)].store(run, std::memory_order_release); }

std::span<const Algorithm> algorithms() { return kAlgorithms; }

const Algorithm& algorithm(AlgorithmId id) { return kAlgorithms[static_cast<std::size_t>(id)]; }

const Algorithm* find_algorithm(std::string_view name) {
  for (const auto& a : kAlgorithms)
    if (name == a.name) return &a;
  return nullptr;
}

std::string algorithm_names() {
  std::string s;
  for (const auto& a : kAlgorithms) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

std::string algorithm_names(CollectiveKind kind, DataType dt, std::size_t count, GroupShape group) {
  std::string s;
  for (const auto& a : kAlgorithms)
    if (a.supports(kind, dt, count, group)) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

}  // namespace strata::collectives
