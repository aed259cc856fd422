// Creation's exchanges over the control mesh instead of through rank 0's store: a Store
// that forwards everything to the rendezvous store but gathers every rank's value along
// the mesh's links (bootstrap/gather.hpp). Dissemination: in step k each rank sends what
// it knows to rank + d_k and receives from rank − d_k, with d_k = 1, 2, 4, ... while that
// at most doubles what it knows, then ⌈N/2⌉ once if still short; each d_k is a mesh link
// (mesh_overlay.hpp), so ⌈log2 N⌉ steps, about 2N values sent per rank and none served
// by a single rank for everyone.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/control_mesh.hpp"
#include "bootstrap/gather.hpp"
#include "bootstrap/store.hpp"

namespace strata::detail {

class MeshGather : public bootstrap::Store, public bootstrap::KnowsLocalAddress, public bootstrap::GathersAll {
 public:
  // `inner` serves every other call; `mesh` must be connected, `rank` and `size` its own.
  MeshGather(bootstrap::Store& inner, bootstrap::ControlMesh& mesh, int rank, int size)
      : inner_(inner), mesh_(mesh), rank_(rank), size_(size) {}

  void set(const std::string& key, const std::string& value) override { inner_.set(key, value); }
  std::vector<std::string> get(const std::vector<std::string>& keys, Clock::time_point deadline) override {
    return inner_.get(keys, deadline);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return inner_.add(key, delta); }
  using Store::get;
  std::string local_address() const override;

  std::optional<std::vector<std::string>> allgather(const std::string& name, int rank, int size,
                                                    const std::string& mine,
                                                    Clock::time_point deadline) override;

 private:
  bootstrap::Store& inner_;
  bootstrap::ControlMesh& mesh_;
  int rank_, size_;
};

// The steps' distances for `size` ranks (exposed for the unit test).
std::vector<int> gather_steps(int size);

// A set of (rank, value) as one string, and back; parse_known throws TransportError
// naming `from` on anything malformed or out of range for `size` ranks.
std::string encode_known(const std::vector<std::optional<std::string>>& known);
void parse_known(const std::string& bytes, int size, int from, std::vector<std::optional<std::string>>& known);

}  // namespace strata::detail
