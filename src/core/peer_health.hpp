// What one rank knows about failures elsewhere in its communicator: the ranks found lost
// (by its own control mesh, or reported by another rank's) and the first failure another
// rank reported. A collective that fails here turns its symptom (a connection closed, a
// deadline passed, the transport aborted under it) into the error that names the cause,
// so every survivor blames the same rank, not the neighbour whose link closed first.
//
// Thread-safe: the control mesh's thread records, the engine thread explains.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/control_mesh.hpp"

namespace strata::detail {

class PeerHealth {
 public:
  explicit PeerHealth(int rank) : rank_(rank) {}

  // True when `rank` was not known lost before. A notice naming this very rank (others
  // found it silent) is recorded the same way.
  bool lose(int rank, const std::string& why);
  // A failure another rank reported (not a loss: those go through lose). The first wins.
  void report(const bootstrap::ControlNotice& n);

  bool any() const;
  std::vector<int> lost() const;

  // The error `what` ("allreduce #12 (...) on rank 0") fails with instead of `symptom`.
  // A mismatch or bad argument seen here stands; a loss known here explains anything
  // else; then a failure reported elsewhere. A transport error waits up to `grace` for
  // the mesh to say why (a peer's death closes its data links and its control
  // connection at about the same moment). `from_here` is set when nothing else explains
  // it: the failure is this rank's own news to pass on. `hint` is what this rank can add
  // to a failure reported elsewhere ("rank 2 has not started allreduce #0").
  std::exception_ptr explain(const std::string& what, std::exception_ptr symptom, std::chrono::milliseconds grace,
                             bool* from_here = nullptr, const std::string& hint = "") const;
  // The error for a call made after the mesh heard of a failure (PeerLostError after a
  // loss, else the reported failure's class); nullptr when it heard of none.
  std::exception_ptr verdict(const std::string& what) const;

 private:
  std::exception_ptr verdict_locked(const std::string& what, const std::string& hint = "") const;

  int rank_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  struct Loss {
    int rank;
    std::string why;
  };
  std::vector<Loss> lost_;  // in the order learnt
  std::optional<bootstrap::ControlNotice> reported_;
};

}  // namespace strata::detail
