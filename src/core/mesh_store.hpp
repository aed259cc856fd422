// The survivors' rendezvous when a communicator shrinks: a Store over the old
// communicator's control mesh, so no store server (which may have died with rank 0) and
// no new address is needed. `members` are the old ranks taking part, to whom every set()
// is sent and whose loss ends a get(); each shrink's keys are kept apart by the prefix
// the new communicator's bootstrap puts on them (CommImpl::Setup::key_prefix).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bootstrap/control_mesh.hpp"
#include "bootstrap/store.hpp"
#include "strata/errors.hpp"

namespace strata::detail {

class MeshStore : public bootstrap::Store, public bootstrap::KnowsLocalAddress {
 public:
  MeshStore(bootstrap::ControlMesh& mesh, std::vector<int> members) : mesh_(mesh), members_(std::move(members)) {}

  void set(const std::string& key, const std::string& value) override { mesh_.put(key, value, members_); }
  std::vector<std::string> get(const std::vector<std::string>& keys, Clock::time_point deadline) override {
    return mesh_.wait(keys, deadline, members_);
  }
  std::int64_t add(const std::string& key, std::int64_t) override {
    throw InvalidArgument("the survivors' rendezvous keeps no counters (add of '" + key + "')");
  }
  using Store::get;
  std::string local_address() const override { return mesh_.host(); }

 private:
  bootstrap::ControlMesh& mesh_;
  std::vector<int> members_;
};

}  // namespace strata::detail
