// How a communicator fails, once and alike on every rank: a collective's symptom (a
// connection closed, a deadline passed) becomes the error that names the cause
// (PeerHealth), the cause goes to every other rank over the control mesh if it is news
// from here, the communicator is marked failed and its transport stopped, so no late
// message lands in a buffer the caller owns again. Every later call fails fast with the
// same class of error.
//
// Thread-safe: the control mesh's thread reports losses and notices, the engine thread
// settles, any thread checks.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/control_mesh.hpp"
#include "core/peer_health.hpp"
#include "strata/errors.hpp"
#include "transport/transport.hpp"

namespace strata::detail {

class FailureSettlement {
 public:
  explicit FailureSettlement(int rank) : rank_(rank), health_(rank) {}

  // What a failure reaches: the mesh that tells the others, the transport that stops.
  // Called once both exist, before the mesh reports anything; both outlive this use.
  void attach(bootstrap::ControlMesh* mesh, transport::Transport* transport);

  // Throws the communicator's failure, if it has one, as the class of error it was.
  void check_usable() const;
  // The error an operation fails with, once: explained by what the mesh knows, recorded
  // as the communicator's failure, passed on to every rank if it is news from here, and
  // the transport stopped. `what` names the operation ("" when the symptom does); `hint`
  // is what this rank adds (a rank that never started the call).
  std::exception_ptr settle(const std::string& what, std::uint64_t seq, const std::exception_ptr& symptom,
                            const std::string& hint = "");
  // The engine's failures that no call settled (a point-to-point operation's).
  std::exception_ptr on_error(const std::exception_ptr& e);
  // The control mesh's news, on its thread.
  void on_peer_lost(int rank, const std::string& why);
  void on_notice(const bootstrap::ControlNotice& n);
  // Communicator::abort: tells everyone, then fails.
  void abort(const std::string& why);

  std::vector<int> lost() const { return health_.lost(); }

 private:
  void tell_everyone(ErrorCode code, std::uint64_t seq, const std::string& text, std::vector<int> lost = {});
  void fail_all(const std::string& why);  // marks the communicator failed, stops the transport

  int rank_;
  PeerHealth health_;
  bootstrap::ControlMesh* mesh_ = nullptr;
  transport::Transport* transport_ = nullptr;
  mutable std::mutex mu_;
  std::atomic<bool> failed_{false};
  std::string failure_;
  std::exception_ptr settled_;  // engine thread: the last error settle() returned
};

}  // namespace strata::detail
