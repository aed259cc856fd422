// Collectives among the processes of one host (groups with shared_memory), moving data
// through a segment of memory every rank of the host maps (Transport::shared_slot)
// instead of messages.
//
// Message-based algorithms move a peer's block twice through memory before reducing it:
// the transport copies it into a staging buffer (one rendezvous per chunk), and the
// reduction reads it back once it has left the cache. Here every rank has a slot of the
// segment that only it writes. The vector goes through in pieces that fit a slot: each
// rank copies its piece into its slot; the owner of each block reduces it straight from
// its own input and the peers' slots, and puts the result in its slot; every rank copies
// the blocks it needs out of their owners' slots. Two plain copies that stay in cache
// cost less than one copy through the kernel, which pins every page (BENCHMARKS.md, "A
// shared segment per host").
//
// A piece takes one round of notices per step that others wait for: "my piece is in my
// slot", "my block is reduced" (allreduce), "I am done with your slot", after which a
// slot may be refilled. The first notice of a call carries its stamp and byte count,
// checked before any slot is read. Each block is reduced by its owner alone, in a fixed
// order, so every rank ends with the same bits.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "kernels/reduce.hpp"
#include "strata/errors.hpp"

namespace strata::collectives {

namespace {

enum class Kind { allreduce, reduce_scatter, allgather };

constexpr std::size_t kPage = 4096;

// One round of notices: tells every peer and hears from each on channel ch. With
// `bytes` (the first round of a call) the notices carry the call's byte count and
// stamp, and every peer's is checked; without, they are empty.
Steps notify(Context& ctx, const Group& g, Channel ch, const std::uint64_t* bytes) {
  // Keeps this rank's stores to its slot ahead of the notice and its loads from peers'
  // slots behind theirs on weakly ordered CPUs, whatever the transport orders itself.
  std::atomic_thread_fence(std::memory_order_release);
  const int p = g.size();
  std::string msg;
  if (bytes) {
    msg.assign(reinterpret_cast<const char*>(bytes), sizeof *bytes);
    msg += ctx.stamp();
  }
  std::vector<std::string> heard(static_cast<std::size_t>(p), std::string(msg.size(), '\0'));
  std::vector<RequestPtr> reqs;
  for (int k = 1; k < p; ++k) {
    const int from = direct_from(g.me, k, p);
    reqs.push_back(ctx.recv(g.rank(from), ch, heard[static_cast<std::size_t>(from)].data(), msg.size()));
  }
  for (int k = 1; k < p; ++k) reqs.push_back(ctx.send(g.rank(direct_to(g.me, k, p)), ch, msg.data(), msg.size()));
  co_await ctx.wait_all(reqs);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (!bytes) co_return;
  for (int k = 1; k < p; ++k) {
    const int from = direct_from(g.me, k, p);
    const std::string& h = heard[static_cast<std::size_t>(from)];
    ctx.expect_bytes(reqs[static_cast<std::size_t>(k - 1)], msg.size());
    if (!ctx.stamp().empty()) ctx.check_stamp(g.rank(from), h.substr(sizeof *bytes));
    std::uint64_t theirs = 0;
    std::memcpy(&theirs, h.data(), sizeof theirs);
    if (theirs != *bytes)
      throw TransportError(ctx.what() + " on rank " + std::to_string(ctx.my_rank()) + ": rank " +
                           std::to_string(g.rank(from)) + " announced " + std::to_string(theirs) + " bytes where " +
                           std::to_string(*bytes) + " were expected");
  }
}

// Block q of the vector is B's block q (in send and recv for allreduce; in send for
// reduce-scatter, whose recv is this rank's block; in recv for allgather, whose send is
// this rank's block). Piece j covers elements [j, j + step) of every block.
Steps through_segment(Context& ctx, const Group& g, Kind kind, const char* send, char* recv, const Blocks& B,
                     DataType dt, ReduceOp op) {
  const int p = g.size(), me = g.me;
  const std::size_t esz = dtype_size(dt);
  const bool reduces = kind != Kind::allgather;
  // Allgather's slot holds only its owner's block; the others hold a piece of every block,
  // each in a part of its own. A piece sits in its part half a page away from where it
  // sits in the vector (modulo a page): had a copy's source and destination the same
  // offset modulo 4 KiB, the CPU would take its loads for aliases of the stores just
  // before them and stall (3 ranks ran 1 MiB slower than 2 MiB that way). Buffers near a
  // page boundary, as large allocations are, then keep their copies clear of it.
  std::size_t part = ctx.shared_slot_bytes() / (reduces ? static_cast<std::size_t>(p) : 1), pad = 0;
  if (part >= 4 * kPage) {
    part &= ~(kPage - 1);
    pad = kPage;
  }
  const std::size_t step = (part - pad) / esz;
  if (step == 0)
    throw TransportError(ctx.what() + " on rank " + std::to_string(ctx.my_rank()) + ": " + std::to_string(p) +
                         " ranks leave no room for one element each in the host's shared segment");
  std::vector<const char*> slot(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) slot[static_cast<std::size_t>(i)] = ctx.shared_slot(g.rank(i));
  char* own_slot = ctx.shared_slot(g.rank(me));
  std::size_t longest = 0;
  for (int q = 0; q < p; ++q) longest = std::max(longest, B.size(q));
  const std::uint64_t call_bytes = B.n * esz;
  for (std::size_t j = 0; j < longest; j += step) {
    auto len = [&](int q) { return B.size(q) > j ? std::min(step, B.size(q) - j) * esz : 0; };
    auto in_vector = [&](int q) { return (B.begin(q) + j) * esz; };
    auto in_slot = [&](int q) {
      return (reduces ? static_cast<std::size_t>(q) * part : 0) + (pad ? (in_vector(q) + kPage / 2) % kPage : 0);
    };
    if (reduces) {
      for (int q = 0; q < p; ++q)
        if (q != me) std::memcpy(own_slot + in_slot(q), send + in_vector(q), len(q));
    } else {
      std::memcpy(own_slot + in_slot(me), send + j * esz, len(me));
    }
    co_await notify(ctx, g, Channel::shared_memory, j == 0 ? &call_bytes : nullptr);
    if (reduces) {
      // In place, dst is also the first operand: reduce(out, a, b) allows out == a.
      char* dst = kind == Kind::allreduce ? recv + in_vector(me) : recv + j * esz;
      const std::size_t n = len(me) / esz;
      for (int k = 1; k < p; ++k) {
        const char* theirs = slot[static_cast<std::size_t>(direct_from(me, k, p))] + in_slot(me);
        kernels::reduce(dt, op, dst, k == 1 ? send + in_vector(me) : dst, theirs, n);
      }
      if (op == ReduceOp::avg) kernels::finish_avg(dt, dst, n, p);
      if (kind == Kind::allreduce) {
        std::memcpy(own_slot + in_slot(me), dst, len(me));
        co_await notify(ctx, g, Channel::data2, nullptr);
      }
    }
    if (kind != Kind::reduce_scatter)
      for (int q = 0; q < p; ++q)
        if (q != me) std::memcpy(recv + in_vector(q), slot[static_cast<std::size_t>(q)] + in_slot(q), len(q));
    co_await notify(ctx, g, Channel::result, nullptr);
  }
}

}  // namespace

Steps shared_memory_allreduce(Context& ctx, const Group& g, const void* send, void* recv, std::size_t count,
                             DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt);
  if (g.size() == 1 || count == 0) co_return copy_if_distinct(recv, send, count * esz);
  const Blocks B{count, g.size(), 0};
  co_await through_segment(ctx, g, Kind::allreduce, static_cast<const char*>(send), static_cast<char*>(recv), B, dt, op);
}

Steps shared_memory_reduce_scatter(Context& ctx, const Group& g, const void* send, void* recv, std::size_t recvcount,
                                  DataType dt, ReduceOp op) {
  const std::size_t esz = dtype_size(dt);
  if (g.size() == 1 || recvcount == 0) co_return copy_if_distinct(recv, send, recvcount * esz);
  const Blocks B{recvcount * static_cast<std::size_t>(g.size()), g.size(), recvcount};
  co_await through_segment(ctx, g, Kind::reduce_scatter, static_cast<const char*>(send), static_cast<char*>(recv), B,
                           dt, op);
}

Steps shared_memory_allgather(Context& ctx, const Group& g, const void* send, void* recv, std::size_t sendcount,
                             DataType dt) {
  const std::size_t block = sendcount * dtype_size(dt);
  char* out = static_cast<char*>(recv);
  copy_if_distinct(out + static_cast<std::size_t>(g.me) * block, send, block);
  if (g.size() == 1 || sendcount == 0) co_return;
  const Blocks B{sendcount * static_cast<std::size_t>(g.size()), g.size(), sendcount};
  co_await through_segment(ctx, g, Kind::allgather, static_cast<const char*>(send), out, B, dt, ReduceOp::sum);
}

}  // namespace strata::collectives
