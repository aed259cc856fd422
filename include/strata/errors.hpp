// Exceptions thrown by the C++ API. Every message names the collective, its sequence
// number and the ranks involved where those are known; the C ABI maps each class to a code.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace strata {

enum class ErrorCode : int {
  ok = 0,
  invalid_argument = 1,  // bad input detected before anything was sent; comm still usable
  mismatch = 2,          // ranks called different collectives at the same sequence number
  timeout = 3,           // a peer did not answer before the deadline
  aborted = 4,           // abort() was called, locally or by a failed earlier collective
  transport = 5,         // a connection failed or a message did not fit its receive buffer
  internal = 6,
  peer_lost = 7,         // a rank's process died or stopped answering; see PeerLostError
  quorum_lost = 8,       // a shrink left too few ranks to go on; see QuorumLostError
};

const char* to_string(ErrorCode c);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& w) : Error(ErrorCode::invalid_argument, w) {}
};
class MismatchError : public Error {
 public:
  explicit MismatchError(const std::string& w) : Error(ErrorCode::mismatch, w) {}
};
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& w) : Error(ErrorCode::timeout, w) {}
};
class AbortedError : public Error {
 public:
  explicit AbortedError(const std::string& w) : Error(ErrorCode::aborted, w) {}
};
class TransportError : public Error {
 public:
  explicit TransportError(const std::string& w) : Error(ErrorCode::transport, w) {}
};
// A rank of the communicator is gone: its process exited (its connections closed without
// a goodbye) or it stopped answering liveness checks (STRATA_HEARTBEAT_S). Every surviving
// rank gets this, naming the same ranks, within seconds; the communicator is then unusable
// and the survivors may go on in a smaller one (Communicator::shrink).
class PeerLostError : public Error {
 public:
  PeerLostError(const std::string& w, std::vector<int> lost)
      : Error(ErrorCode::peer_lost, w), lost_(std::move(lost)) {}
  // Ranks (of the communicator that failed) known to be lost, ascending.
  const std::vector<int>& lost_ranks() const noexcept { return lost_; }

 private:
  std::vector<int> lost_;
};
// A shrink that would leave no more than half of the communicator's ranks: the ranks it
// excludes may be alive on the other side of a partition, shrinking too, and two halves
// going on would fork the job. Exactly half goes on only where the arbiter store
// (CommOptions::arbiter, STRATA_ARBITER) names it the winner. This rank can rejoin the
// side that went on through Communicator::join once the partition heals (README, "Fault
// tolerance").
class QuorumLostError : public Error {
 public:
  explicit QuorumLostError(const std::string& w) : Error(ErrorCode::quorum_lost, w) {}
};

}  // namespace strata
