// Receiving from any source over transports that match by (source, tag).
//
// Point-to-point messages between two ranks are numbered (the n-th send to a peer
// carries tag p2p_tag(n)), so a receive from a known peer knows its tag when issued. A
// receive from any source does not: it probes every rank's next number until one has a
// message waiting (Transport::probe), then receives that one and advances that rank's
// number. Until it has matched, no other receive can take a number, since it might take
// the one the any-source receive is about to; so receives issued after it wait at issue
// for it to match (or fail). Sends never wait.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/transport.hpp"

namespace strata::detail {

// The next message number expected from each rank, shared by the issuing threads and the
// engine (which advances it when an any-source receive matches).
class ReceiveOrder {
 public:
  explicit ReceiveOrder(int size) : next_(static_cast<std::size_t>(size), 0) {}
  // The number for a receive from `peer`, once no any-source receive is unmatched.
  std::uint64_t take(int peer);
  // Registers an any-source receive, once no other is unmatched.
  void begin_any();
  // The number the next message from `peer` carries (engine, while an any-source waits).
  std::uint64_t peek(int peer);
  // The any-source receive matched `peer` (its number advances), or ended unmatched (-1).
  void end_any(int peer);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::uint64_t> next_;
  bool any_open_ = false;
};

// The request an any-source receive's work waits on: it probes on every poll until a
// message is found, then is the receive of that message. Engine thread (or a waiter
// driving the engine), like every request.
class AnySourceRecv : public transport::Request {
 public:
  AnySourceRecv(transport::Transport& t, std::shared_ptr<ReceiveOrder> order, void* buf, std::size_t bytes,
                std::shared_ptr<int> source);
  ~AnySourceRecv() override;  // unmatched: lets later receives go on
  bool done() const override;
  const std::string& error() const override;
  std::size_t bytes() const override { return inner_ ? inner_->bytes() : 0; }

 private:
  transport::Transport& transport_;
  std::shared_ptr<ReceiveOrder> order_;
  void* buf_;
  std::size_t bytes_;
  std::shared_ptr<int> source_;
  mutable transport::RequestPtr inner_;  // the matched message's receive
  mutable int next_probe_ = 0;           // where the next round of probes starts, for fairness
  std::string no_error_;
};

}  // namespace strata::detail
