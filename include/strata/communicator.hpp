// The C++ entry point: a communicator over a fixed set of ranks.
//
//   auto comm = strata::Communicator::from_env();          // STRATA_*, torchrun, MPI, Slurm
//   comm.allreduce(buf, buf, n, strata::DataType::f32, strata::ReduceOp::sum).wait();
//
// Every collective returns at once with a Work; operations run in issue order on the
// communicator's progress engine, and several may be outstanding. Buffers must stay
// valid until the Work completes. Arguments are checked before anything is queued.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/locality.hpp"
#include "strata/options.hpp"
#include "strata/store.hpp"
#include "strata/types.hpp"
#include "strata/work.hpp"

namespace strata {

namespace detail {
class CommImpl;
}

// Bytes this rank moved over the inter-region (WAN) link, cumulative since the
// communicator was created (collectives and point to point alike, including the small
// per-collective consistency check each rank sends its neighbour). Zero when the
// communicator does not span regions, or when STRATA_WAN_LINK=0 sends cross-region
// traffic over the ordinary transport. Other ranks' figures are not included: gather
// them with a collective if needed.
struct TrafficStats {
  std::uint64_t wan_bytes_sent = 0;       // message payload handed to the WAN link
  std::uint64_t wan_wire_bytes_sent = 0;  // written to WAN sockets: payload, frame headers,
                                          // acknowledgements and resends
  std::uint64_t wan_bytes_received = 0;   // message payload received over the WAN link
  std::uint64_t wan_bytes_resent = 0;     // payload written again after a stream broke
  // Collectives on device buffers: bytes copied from device to page-locked host memory
  // and back (the shard of each segment where the device plan runs, the whole buffers
  // where the call is staged whole).
  std::uint64_t device_to_host_bytes = 0;
  std::uint64_t host_to_device_bytes = 0;
};

// What this rank's inter-region link has measured of its path, from its streams' TCP
// state: of the peer whose path holds the most bytes in flight. Zeros where the
// communicator does not span regions (or STRATA_WAN_LINK=0), or before it has carried
// enough to tell.
struct WanPathStats {
  double rtt_s = 0;             // the shortest round trip seen (the path without a queue)
  double srtt_s = 0;            // the smoothed round trip (with the queue a message meets)
  double rate_bytes_per_s = 0;  // delivery rate while busy, the best of the last 10 s, all streams
  double loss = 0;              // segments retransmitted over segments sent
  int streams = 0;              // streams that carried data in that time
};

// Opaque bootstrap address in the shape of ncclUniqueId: created once (by the rank that
// will be rank 0, or any process that then stays alive), shared out of band.
struct UniqueId {
  std::array<char, 128> bytes{};
  static UniqueId create();  // starts a rendezvous store in this process
  std::string root() const;  // "host:port"
};

class Communicator {
 public:
  // Rank and size from STRATA_RANK/STRATA_WORLD_SIZE/STRATA_ROOT, then torchrun's
  // RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, then Open MPI's and Slurm's variables.
  static Communicator from_env(const CommOptions& opts = {});

  // root is "host:port" of the rendezvous store; rank 0 serves it.
  Communicator(int rank, int size, const std::string& root, const CommOptions& opts = {});
  Communicator(const UniqueId& id, int rank, int size, const CommOptions& opts = {});
  // Meets the other ranks in a store the caller already has (a framework's, such as
  // torch's c10d store); no store server is started. Keys go under "strata/", so one
  // store can hold several communicators only if each gets its own prefix of it.
  Communicator(std::shared_ptr<Store> store, int rank, int size, const CommOptions& opts = {});

  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();

  int rank() const;
  int size() const;
  const Locality& locality(int rank) const;
  TransportKind transport() const;
  std::chrono::milliseconds timeout() const;
  // Thread-safe and cheap (a few relaxed loads); see TrafficStats.
  TrafficStats traffic() const;
  // Thread-safe; see WanPathStats.
  WanPathStats wan_path() const;
  // The registered algorithms CallOptions::algorithm may name for `kind` on elements of
  // `dt` here, in registry order: those that implement it for this many ranks and this
  // communicator's links (shared_memory only where every rank shares the host's memory).
  std::vector<std::string> algorithms(CollectiveKind kind, DataType dt) const;

  // count is per rank for all operations below except reduce_scatter (recvcount: send
  // holds size()*recvcount) and allgather (sendcount: recv holds size()*sendcount).
  // In place follows NCCL: recv == send for allreduce, broadcast and reduce;
  // recv == send + rank()*recvcount for reduce_scatter; send == recv + rank()*sendcount
  // for allgather. Any other overlap is rejected.
  Work allreduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
                 const CallOptions& o = {});
  Work reduce_scatter(const void* send, void* recv, std::size_t recvcount, DataType dt,
                      ReduceOp op, const CallOptions& o = {});
  Work allgather(const void* send, void* recv, std::size_t sendcount, DataType dt,
                 const CallOptions& o = {});
  // send is read on root only; recv is written on every rank (on root too).
  Work broadcast(const void* send, void* recv, std::size_t count, DataType dt, int root,
                 const CallOptions& o = {});
  // recv is written on root only and may be null elsewhere.
  Work reduce(const void* send, void* recv, std::size_t count, DataType dt, ReduceOp op,
              int root, const CallOptions& o = {});
  Work barrier(const CallOptions& o = {});

  // Every rank sends block j of send (count elements at j*count) to rank j, which puts
  // it at block rank() of its recv; both hold size()*count. recv == send is allowed (in
  // place); any other overlap is rejected.
  Work alltoall(const void* send, void* recv, std::size_t count, DataType dt, const CallOptions& o = {});
  // Uneven splits (MPI_Alltoallv): send_counts[j] elements at send + send_displs[j] go to
  // rank j; recv_counts[j] elements from rank j land at recv + recv_displs[j] (counts and
  // displacements in elements, size() of each). Rank i's send_counts[j] must equal rank
  // j's recv_counts[i], else the call fails naming both. Regions of recv must not
  // overlap; send and recv may be the same buffer.
  Work alltoallv(const void* send, std::span<const std::size_t> send_counts,
                 std::span<const std::size_t> send_displs, void* recv,
                 std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                 DataType dt, const CallOptions& o = {});

  // Point to point: sends to one peer are matched by that peer's receives in order.
  Work send(const void* buf, std::size_t count, DataType dt, int peer, const CallOptions& o = {});
  Work recv(void* buf, std::size_t count, DataType dt, int peer, const CallOptions& o = {});
  // A receive from whichever rank's message arrives first (MPI_ANY_SOURCE): *source is
  // that rank once the work is done. Until it has matched a message, receives issued
  // after it (from any peer) wait at issue, so that none takes the message it will.
  Work recv_any(void* buf, std::size_t count, DataType dt, int* source, const CallOptions& o = {});

  // Fails every outstanding and future operation with AbortedError; thread-safe.
  void abort();

  // Fault tolerance. When a rank dies or stops answering, every survivor's operations
  // fail with PeerLostError naming it (within seconds: see STRATA_HEARTBEAT_S for frozen
  // ranks), and the communicator stays unusable.
  //
  // shrink() builds the communicator of the survivors without a new rendezvous (as
  // ncclCommShrink): every survivor calls it with the same lost ranks (those of the
  // PeerLostError), and they meet over this communicator's control connections, so it
  // works with rank 0 or the store gone. Ranks are renumbered densely in their old order;
  // the hierarchy, algorithm selection and WAN link are rebuilt for the new layout. A
  // survivor that passes a different list gets MismatchError, as do all the others,
  // rather than a different world. This communicator stays as it was: destroy it after.
  // Also works on a healthy communicator, if the excluded ranks no longer take part.
  Communicator shrink(std::span<const int> lost_ranks, const CommOptions& opts = {});
  // Ranks known lost so far, ascending (empty while all are well).
  std::vector<int> lost_ranks() const;

  // Grow (as ncclCommGrow): at a collective boundary every rank of this communicator
  // calls grow() and every new rank calls join(); together they form a communicator of
  // new_size ranks, in which this one's ranks keep their numbers and the new ones take
  // size() .. new_size-1. They meet in `store` under `generation`, a name new for each
  // grow of the job ("grow-17"): a store that outlives any rank (strata-store, or
  // torch's), not one that rank 0 serves. The ranks of this communicator first check,
  // with a collective on it, that they agree on new_size and generation. This
  // communicator stays usable; the caller usually destroys it.
  Communicator grow(std::shared_ptr<Store> store, int new_size, const std::string& generation,
                    const CommOptions& opts = {});
  // rank < 0: take the next free place (in the order the joiners arrive). Joiners must
  // use the transport the others do (CommOptions::transport or STRATA_TRANSPORT).
  static Communicator join(std::shared_ptr<Store> store, int rank, int new_size, const std::string& generation,
                           const CommOptions& opts = {});

  // Brings every rank's `buffers` to root's bytes (a broadcast each), and with residuals
  // also root's compression residuals (save_residuals/restore_residuals), then proves it:
  // every rank hashes what it now holds (SHA-256) and all compare. A rank whose state
  // differs fails the call on every rank with MismatchError naming it. Returns the hex
  // digest, the same on every rank. For joiners after grow(), and for a check that
  // replicas still agree.
  std::string share_state(std::span<const std::span<std::byte>> buffers, int root, bool residuals = false);

  // Error-feedback residuals of compressed allreduce (see Compression), ordered with the
  // collectives issued before: drop one key's (or, with "", all), or save them with a
  // training checkpoint and restore them on resume (same world and plan). restore throws
  // InvalidArgument on bytes that are not a residual snapshot and then changes nothing.
  void reset_residuals(const std::string& key = "");
  std::vector<std::byte> save_residuals();
  void restore_residuals(std::span<const std::byte> saved);

 private:
  explicit Communicator(std::unique_ptr<detail::CommImpl> impl);
  std::unique_ptr<detail::CommImpl> impl_;
};

}  // namespace strata
