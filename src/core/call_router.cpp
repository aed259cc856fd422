#include "core/call_router.hpp"

#include <cstring>
#include <stdexcept>

#include "base/log.hpp"
#include "collectives/alltoall.hpp"
#include "collectives/registry.hpp"
#include "core/tuning_protocol.hpp"
#include "hierarchy/hierarchical.hpp"
#include "quant/compressed_allreduce.hpp"
#include "quant/compression.hpp"
#include "strata/errors.hpp"
#include "transport/tags.hpp"

namespace strata::detail {

using transport::Clock;

namespace {

// " (algorithm ring here, double_tree there)" when only the algorithms differ, which the
// descriptions do not show.
std::string algorithm_difference(const Fingerprint& mine, const Fingerprint& theirs) {
  if (mine.on_device != theirs.on_device)
    return mine.on_device ? " (device buffers here, host buffers there: a call's buffers must be of one kind on every rank)"
                          : " (host buffers here, device buffers there: a call's buffers must be of one kind on every rank)";
  if (mine.algorithm == theirs.algorithm) return "";
  auto name = [](std::uint8_t id) -> std::string {
    const auto all = collectives::algorithms();
    return id == 0 || id > all.size() ? "automatic" : all[id - 1u].name;
  };
  return " (algorithm " + name(mine.algorithm) + " here, " + name(theirs.algorithm) +
         " there: different CallOptions::algorithm or STRATA_ALGO)";
}

// A timeout, told which rank never started the collective; any other error as it is.
std::exception_ptr with_absent(const std::exception_ptr& e, const std::string& absent) {
  try {
    std::rethrow_exception(e);
  } catch (const TimeoutError& t) {
    return std::make_exception_ptr(TimeoutError(std::string(t.what()) + "; " + absent));
  } catch (...) {
    return e;
  }
}

}  // namespace

CallRouter::CallRouter(Parts p) : p_(p) {
  quant::install_compressed();  // the registry's compressed allreduce lives in quant/
}

Fingerprint CallRouter::fingerprint(std::uint64_t seq, const collectives::CollArgs& a) {
  Fingerprint fp;
  fp.seq = seq;
  fp.kind = a.kind;
  fp.dtype = a.dtype;
  fp.count = a.count;
  fp.op = a.op;
  fp.root = a.root;
  if (a.compression) fp.compression = quant::compression_hash(*a.compression);
  return fp;
}

void CallRouter::run(Fingerprint fp, const collectives::CollArgs& a, Clock::time_point deadline,
                     std::string& absent, const hierarchy::CallEngines* device) {
  fp.on_device = device ? 1 : 0;
  const std::string what = fp.describe();
  const int rank = p_.transport->rank(), size = p_.size;
  collectives::Context::Params params;
  params.transport = p_.transport;
  params.seq = fp.seq;
  params.deadline = deadline;
  params.scratch = p_.scratch;
  params.chunk_bytes = p_.chunk_bytes;
  params.what = what;
  // Plans' per-level calls pick their algorithms with this communicator's selector.
  params.chooser = p_.plan.selector;

  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  Fingerprint theirs;
  auto mismatch = [&fp, rank](int peer, const Fingerprint& other) {
    return MismatchError("collective mismatch: rank " + std::to_string(rank) + " called " + fp.describe() +
                         " but rank " + std::to_string(peer) + " called " + other.describe() +
                         algorithm_difference(fp, other));
  };
  transport::RequestPtr fp_send, fp_recv;
  try {
    const CallPlan plan = settle_plan(p_.plan, a, what);
    fp.algorithm = plan.fingerprint_id();
    // Ring-neighbour fingerprint exchange, concurrent with the algorithm's own traffic.
    if (size > 1) {
      const auto tag = transport::collective_tag(fp.seq, transport::Channel::fingerprint);
      fp_recv = p_.transport->irecv(prev, tag, &theirs, sizeof theirs);
      fp_send = p_.transport->isend(next, tag, &fp, sizeof fp);
      params.stamp.assign(reinterpret_cast<const char*>(&fp), sizeof fp);
      params.stamp_mismatch = [mismatch](int peer, const std::string& bytes) {
        Fingerprint other;
        std::memcpy(&other, bytes.data(), std::min(bytes.size(), sizeof other));
        throw mismatch(peer, other);
      };
      params.guard = [&](bool final) {
        if (!fp_recv->done() && final)  // the fingerprint travels ahead of the data
          transport::wait(*p_.transport, fp_recv, Clock::now() + std::chrono::seconds(1));
        if (!fp_recv->done() || !fp_recv->error().empty()) return;
        if (std::memcmp(&theirs, &fp, sizeof fp) != 0) throw mismatch(prev, theirs);
      };
    }
    collectives::Context ctx(params);
    // Both neighbours' fingerprints are through and match: every rank reached this very call.
    auto checked = [&] {
      if (size == 1) return;
      ctx.finish({fp_send, fp_recv});
      params.guard(false);
    };
    run_plan(ctx, plan, fp, a, checked, device);
    if (size > 1) {
      checked();
      // A broadcast's root can finish on its own sends while a rank further on called
      // something else, and a reduce's root can fold in a partial sum of a rank that
      // did: the root finishes only once every rank has passed its check (an empty
      // message each), so the mismatch fails it too, not its next call.
      if (a.kind == CollectiveKind::broadcast || a.kind == CollectiveKind::reduce) confirm_to_root(ctx, a.root);
    }
  } catch (...) {
    // The fingerprint tells whether the previous rank ever reached this collective; a
    // timeout says so itself, any failure passes it on (an abort fails the receive too).
    const bool heard = !fp_recv || (fp_recv->done() && fp_recv->error().empty());
    absent = heard || size == 1 ? "" : "rank " + std::to_string(prev) + " has not started " + what;
    if (absent.empty()) throw;
    std::rethrow_exception(with_absent(std::current_exception(), absent));
  }
}

void CallRouter::run_plan(collectives::Context& ctx, const CallPlan& plan, const Fingerprint& fp,
                          const collectives::CollArgs& a, const std::function<void()>& checked,
                          const hierarchy::CallEngines* device) {
  const auto& world = *p_.plan.world;
  if (device) {
    // A flat communicator's device engines are one level, NCCL over the world.
    if (plan.route == CallPlan::Route::flat && !p_.plan.levels)
      ctx.run(device->level(0).collective(ctx, world, a));
    else if (plan.route == CallPlan::Route::hierarchical)
      ctx.run(hierarchy::run_on_device(ctx, *p_.plan.levels, a, *device));
    else
      throw std::logic_error(ctx.what() + ": device engines for a call neither the plan nor NCCL runs");
    return;
  }
  switch (plan.route) {
    case CallPlan::Route::pairwise:
      ctx.run(collectives::alltoall(ctx, world, a));
      return;
    case CallPlan::Route::hierarchical:
      ctx.run(hierarchy::run_hierarchical(ctx, *p_.plan.levels, a, p_.feedback));
      return;
    case CallPlan::Route::flat:
      break;
  }
  collectives::CollArgs b = a;
  b.algorithm = plan.algorithm;
  b.feedback = p_.feedback;
  const auto start = Clock::now();
  ctx.run(plan.algorithm->run(ctx, world, b));
  if (!plan.tuned) return;
  auto& tuner = *p_.plan.tuner;
  const auto bytes = topology::message_bytes(a.kind, a.count, a.dtype, p_.size);
  tuner.record(a.kind, bytes, clock_seconds(start), clock_seconds(Clock::now()));
  if (auto mine = tuner.offer(a.kind, bytes)) {
    checked();  // every rank ran this very call before it is counted
    tuner.settle(a.kind, bytes, agree_on_times(*p_.transport, p_.size, tuner, world.shared_memory, fp.seq, a.kind,
                                               bytes, *mine, ctx.deadline()));
    if (p_.transport->rank() == 0) log::info("tuned:" + tuner.describe(a.kind, bytes));
  }
}

void CallRouter::confirm_to_root(collectives::Context& ctx, int root) {
  std::vector<transport::RequestPtr> reqs;
  const int rank = p_.transport->rank();
  if (rank != root) {
    reqs.push_back(ctx.send(root, transport::Channel::confirm, nullptr, 0));
  } else {
    for (int r = 0; r < p_.size; ++r)
      if (r != root) reqs.push_back(ctx.recv(r, transport::Channel::confirm, nullptr, 0));
  }
  ctx.finish(std::move(reqs));
}

}  // namespace strata::detail
