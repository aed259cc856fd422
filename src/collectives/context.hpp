// What an algorithm sees while it runs one collective: the group it works in, tagged
// send/recv restricted to this collective's tag space, waits that enforce the deadline
// and the cross-rank consistency check, and reusable scratch memory.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

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

 private:
  struct AlignedDelete {
    void operator()(char* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  struct Block {
    std::unique_ptr<char[], AlignedDelete> data;
    std::size_t size = 0;
  };
  Block blocks_[5];
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
  explicit Context(Params p) : p_(std::move(p)) {}

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
  void wait(const RequestPtr& r);
  void wait_all(const std::vector<RequestPtr>& rs);
  // Waits until at least `r` is done, also failing on mismatch; returns its byte count.
  std::size_t wait_bytes(const RequestPtr& r);
  // After a completed receive: a short message means the sender disagreed about sizes.
  void expect_bytes(const RequestPtr& r, std::size_t bytes);

  // Work that must keep moving while this context blocks (a pipelined plan's stages in
  // flight): called between polls of the transport by every wait below. Its own
  // failures propagate out of the wait that ran it.
  void set_background(std::function<void()> f) { background_ = std::move(f); }
  // Blocks, driving the transport and the background work, until done() is true.
  // `waiting_for` names what is awaited in the timeout message.
  void wait_until(const std::function<bool()>& done, const std::string& waiting_for);

  // Slots 0-2 belong to the flat algorithms; 3 is free for plans that call them.
  void* scratch(int slot, std::size_t bytes) { return p_.scratch->get(slot, bytes); }
  std::size_t chunk_bytes() const { return p_.chunk_bytes; }
  const std::string& what() const { return p_.what; }
  int my_rank() const { return p_.transport->rank(); }
  const Chooser& chooser() const;
  std::uint64_t seq() const { return p_.seq; }
  Clock::time_point deadline() const { return p_.deadline; }
  // This call's stamp (see Params), and the check of one a peer (transport rank) sent:
  // throws MismatchError naming both calls when they differ.
  const std::string& stamp() const { return p_.stamp; }
  void check_stamp(int peer, const std::string& theirs);

 private:
  [[noreturn]] void throw_timeout(const std::string& waiting_for);

  Params p_;
  std::function<void()> background_;
};

}  // namespace strata::collectives
