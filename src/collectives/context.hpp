// What an algorithm sees while it runs one collective: the group it works in, tagged
// send/recv restricted to this collective's tag space, waits that enforce the deadline
// and the cross-rank consistency check, and reusable scratch memory.
#pragma once

#include <coroutine>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collectives/steps.hpp"
#include "strata/errors.hpp"
#include "transport/tags.hpp"
#include "transport/transport.hpp"

namespace strata::collectives {

using transport::Channel;
using transport::Clock;
using transport::RequestPtr;

class Chooser;  // dispatch.hpp

// What an algorithm's supports() may ask of a group: its size, and how many dedicated
// parameter-server processes serve it (only a communicator's world group, and only when
// it was started with STRATA_SERVERS). Converts from a bare size, all most callers know.
// And whether every member may read every other's memory (Group::shared_memory).
struct GroupShape {
  int size = 1;
  int servers = 0;
  bool shared_memory = false;
  GroupShape(int size_, int servers_ = 0, bool shared_memory_ = false)  // NOLINT: implicit on purpose
      : size(size_), servers(servers_), shared_memory(shared_memory_) {}
};

// The ranks one algorithm runs over, in the order the algorithm uses; `me` indexes it.
struct Group {
  std::vector<int> ranks;
  int me = 0;
  // Transport ranks of the dedicated servers attached to this group (ps/shard_server.hpp);
  // they are not members and run no algorithm, they answer param_server's pushes.
  std::vector<int> servers;
  // Every member maps the host's shared segment (Context::shared_slot): all on one
  // host, over a transport that shares memory there. Whoever builds the group sets it,
  // from Transport::shares_memory, the same way on every member.
  bool shared_memory = false;
  int size() const { return static_cast<int>(ranks.size()); }
  int rank(int i) const { return ranks[static_cast<std::size_t>(i)]; }
  GroupShape shape() const { return {size(), static_cast<int>(servers.size()), shared_memory}; }
  static Group world(int rank, int size);
};

// Growable buffers that survive across collectives, so large operations do not fault in
// fresh pages every call. Owned by one communicator, used by its engine thread only.
// Slot 3 belongs to hierarchical plans (hierarchy/), which call algorithms while holding
// it; algorithms use the others.
class Scratch {
 public:
  void* get(int slot, std::size_t bytes);
  // Scratch of its own for work in flight beside this one's (Context::lane).
  Scratch& lane(std::size_t i);

 private:
  struct AlignedDelete {
    void operator()(char* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  struct Block {
    std::unique_ptr<char[], AlignedDelete> data;
    std::size_t size = 0;
  };
  Block blocks_[5];
  std::vector<std::unique_ptr<Scratch>> lanes_;
};

class Context;

// What `co_await ctx.wait(...)` suspends on: the requests, and the coroutine to resume
// when they are all done. It waits in its context's driver while suspended.
class [[nodiscard]] WaitFor {
 public:
  // One or two requests are held inline: the common waits allocate nothing.
  WaitFor(Context& ctx, RequestPtr a, RequestPtr b = {})
      : ctx_(&ctx), inline_{std::move(a), std::move(b)}, reqs_(inline_, inline_[1] ? 2 : 1) {}
  WaitFor(Context& ctx, std::vector<RequestPtr> reqs) : ctx_(&ctx), many_(std::move(reqs)), reqs_(many_) {}
  WaitFor(const WaitFor&) = delete;
  WaitFor& operator=(const WaitFor&) = delete;
  ~WaitFor();

  // Always suspends: the driver's wait also progresses the transport and runs the
  // consistency check, as every wait did when algorithms blocked.
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h);
  // The first request's byte count (wait_bytes).
  std::size_t await_resume() const { return reqs_.empty() ? 0 : reqs_.front()->bytes(); }

 private:
  friend class Context;
  Context* ctx_;
  RequestPtr inline_[2];
  std::vector<RequestPtr> many_;
  std::span<const RequestPtr> reqs_;
  std::coroutine_handle<> h_;
  bool parked_ = false;
};

class Context {
 public:
  struct Params {
    transport::Transport* transport = nullptr;
    std::uint64_t seq = 0;
    Clock::time_point deadline{};
    Scratch* scratch = nullptr;
    std::size_t chunk_bytes = 1 << 20;
    std::string what;                 // "allreduce #12 (f32 x 1000, sum)", for errors
    std::function<void(bool)> guard;  // throws on a detected mismatch; arg: final check
    // The call's fingerprint as bytes, and what a peer's different one throws: for
    // algorithms that finish in one round, before the ring check (guard) could hold a
    // mismatched call's data back. Empty: no stamps to compare (outside a communicator).
    std::string stamp;
    std::function<void(int peer, const std::string& theirs)> stamp_mismatch;
    // Picks the algorithm of every call run in this context that names none, the per-level
    // calls of hierarchical plans included; nullptr: threshold_chooser().
    const Chooser* chooser = nullptr;
  };
  explicit Context(Params p);

  // Peers are transport ranks (use Group::rank to translate).
  RequestPtr send(int peer, Channel ch, const void* buf, std::size_t bytes);
  RequestPtr recv(int peer, Channel ch, void* buf, std::size_t bytes);
  // On an explicit tag instead of this collective's: for streams that outlive one
  // collective, such as a worker's conversation with a dedicated server.
  RequestPtr send_tagged(int peer, transport::Tag tag, const void* buf, std::size_t bytes);
  RequestPtr recv_tagged(int peer, transport::Tag tag, void* buf, std::size_t bytes);
  // A member's (a transport rank's) slot of the host's shared segment, for groups with
  // shared_memory, and its size; failures name the collective and both ranks.
  char* shared_slot(int r);
  std::size_t shared_slot_bytes() const;
  // Suspends the calling coroutine until every request is done (co_await ctx.wait(r));
  // the driver fails the call on a failed request, a detected mismatch or the deadline.
  // wait_bytes yields the byte count of what arrived.
  WaitFor wait(RequestPtr r);
  WaitFor wait(RequestPtr a, RequestPtr b);
  WaitFor wait_all(std::vector<RequestPtr> rs);
  WaitFor wait_bytes(RequestPtr r) { return wait(std::move(r)); }
  // After a completed receive: a short message means the sender disagreed about sizes.
  void expect_bytes(const RequestPtr& r, std::size_t bytes);

  // Drives `s` (and whatever it started) to its end on this thread: resumes each piece
  // of work whose requests are done, runs the consistency check now and then, enforces
  // the deadline. Rethrows the first failure.
  void run(Steps s);
  // Blocks until every request is done: run() of a single wait.
  void finish(std::vector<RequestPtr> rs);
  // Puts `s` in flight beside the running work (it runs up to its first suspension now),
  // to be awaited later (co_await s); a failure it meets before then ends run() at once.
  // `s` and the context it runs in must outlive it.
  void start(Steps& s);
  // The same call on scratch memory of its own (lane i of this context's), for work
  // started beside this context's.
  Context lane(std::size_t i) const;

  // Slots 0-2 belong to the flat algorithms; 3 is free for plans that call them.
  void* scratch(int slot, std::size_t bytes) { return p_.scratch->get(slot, bytes); }
  std::size_t chunk_bytes() const { return p_.chunk_bytes; }
  const std::string& what() const { return p_.what; }
  int my_rank() const { return p_.transport->rank(); }
  // What the transport measured of its path across regions (zeros within one), for plans
  // that size their pipelines by it.
  transport::PathFigures path() const { return p_.transport->report().path(); }
  const Chooser& chooser() const;
  std::uint64_t seq() const { return p_.seq; }
  Clock::time_point deadline() const { return p_.deadline; }
  // This call's stamp (see Params), and the check of one a peer (transport rank) sent:
  // throws MismatchError naming both calls when they differ.
  const std::string& stamp() const { return p_.stamp; }
  void check_stamp(int peer, const std::string& theirs);

 private:
  friend class WaitFor;
  struct Driver;
  void drive();
  void resume(WaitFor* w);
  [[noreturn]] void throw_timeout(const std::string& waiting_for);
  [[noreturn]] void rethrow_failed_request(const TransportError& e);

  Params p_;
  Driver* driver_;  // this thread's: shared by this context's lanes
};

}  // namespace strata::collectives
