// The point-to-point seam every algorithm talks through.
//
// A Transport connects one rank to all others of a world. Messages are matched by
// (source rank, tag); messages with the same (source, tag) are matched in the order they
// were sent, so a collective may reuse one tag for a whole stream of chunks.
//
// The seam is small on purpose: tagged send and receive, progress and waiting, abort,
// and whether sends still owe bytes (settled). What a transport can tell of its link
// (profile, traffic, trouble) sits beside it in link_report.hpp; the host's shared
// segment is only carried here for the collectives (host_segment.hpp).
//
// Threading: one thread (the communicator's progress engine) calls everything except
// abort(), which any thread may call. Nothing progresses unless that thread calls
// progress() or wait_event(); algorithms only ever block through wait() below.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/link_report.hpp"

namespace strata::transport {

class HostSegment;

// Only the low kTagBits bits are significant; see tags.hpp for the layout.
using Tag = std::uint64_t;
inline constexpr int kTagBits = 40;

using Clock = std::chrono::steady_clock;

class Request {
 public:
  virtual ~Request() = default;
  // True once the operation completed or failed; error() tells which.
  virtual bool done() const = 0;
  // Empty while pending or on success.
  virtual const std::string& error() const = 0;
  // Bytes actually received (receives) or sent (sends); valid once done.
  virtual std::size_t bytes() const = 0;
  int peer() const { return peer_; }

 protected:
  explicit Request(int peer) : peer_(peer) {}

 private:
  int peer_;
};

using RequestPtr = std::shared_ptr<Request>;

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // The buffer must stay untouched (send) or unread (recv) until the request is done. A
  // send may be done before its bytes reached the peer (the WAN link copies them): the
  // transport then needs progress() calls until settled().
  // A receive fails if the matched message is larger than `capacity`.
  // Sending to yourself is allowed and matched like any other message.
  virtual RequestPtr isend(int peer, Tag tag, const void* buf, std::size_t bytes) = 0;
  virtual RequestPtr irecv(int peer, Tag tag, void* buf, std::size_t capacity) = 0;
  // Whether a message from `peer` with `tag` has arrived (its header at least) and waits
  // for a receive; receiving from any source is built on it. A message held back because
  // it would exceed the unexpected budget is seen once there is room.
  virtual bool probe(int peer, Tag tag) = 0;

  // Advances communication without blocking; returns true if anything happened.
  virtual bool progress() = 0;
  // Blocks until something may have happened, at most `max`. May return early.
  virtual void wait_event(std::chrono::microseconds max) = 0;

  // Thread-safe. Pending and future requests fail (pending ones by the next progress()
  // on the engine thread); wait_event returns promptly. A receive that a peer was
  // already writing into (UCX rendezvous over shared memory) may still land until the
  // transport is destroyed, so the communicator never reuses such buffers itself.
  virtual void abort(const std::string& why) = 0;
  virtual bool aborted() const = 0;
  virtual std::string abort_reason() const = 0;

  // Thread-safe. False while sends that are already done still have bytes to deliver or
  // acknowledgements to await: whoever drives the transport keeps calling progress()
  // (the engine does; settle() below for other callers).
  virtual bool settled() const { return true; }

  // Beside the seam: the link's profile, traffic and trouble (link_report.hpp).
  virtual const LinkReport& report() const;

  // The host's shared segment, which the transport only carries for the collectives
  // (host_segment.hpp). Whether this rank and `peer` map it: peers on this host, when
  // every rank of the host mapped it at start-up. Symmetric, and the same answer on every
  // rank of the host, so collectives may choose by it.
  bool shares_memory(int peer) const;
  // Rank r's slot, as mapped in this process: r is this rank or one it shares_memory
  // with, and only r writes it. Throws TransportError where there is none.
  char* shared_slot(int r);
  // The bytes of each such slot; 0 where ranks share no segment.
  std::size_t shared_slot_bytes() const;
  // The segment this rank's host agreed on (transport/factory.cpp); kept until the
  // transport goes.
  void use_host_segment(std::shared_ptr<HostSegment> segment) { segment_ = std::move(segment); }
  const std::shared_ptr<HostSegment>& host_segment() const { return segment_; }

 private:
  std::shared_ptr<HostSegment> segment_;  // null where no segment was made
};

// `msg`, followed by the transport's trouble when it has any.
inline std::string with_trouble(const Transport& t, std::string msg) {
  const std::string why = t.report().trouble();
  return why.empty() ? msg : msg + "; " + why;
}

// Waits for every request, driving progress: spins briefly (latency), then sleeps in
// wait_event (fairness when ranks outnumber cores). Throws TransportError on a failed
// request, AbortedError after abort, and returns false if the deadline passes first.
bool wait_all(Transport& t, std::span<const RequestPtr> reqs, Clock::time_point deadline);

// How long waits poll before sleeping; process-wide, set when a communicator is created.
void set_spin(std::chrono::microseconds us);
std::chrono::microseconds spin();
inline bool wait(Transport& t, const RequestPtr& r, Clock::time_point deadline) {
  return wait_all(t, std::span<const RequestPtr>(&r, 1), deadline);
}
// Drives progress until the transport is settled(); false if the deadline passes first.
bool settle(Transport& t, Clock::time_point deadline);

}  // namespace strata::transport
