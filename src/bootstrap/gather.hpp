// The exchange communicator creation is made of: every rank publishes one value and reads
// everyone's. Through a store that is N sets and N reads of N keys, all served by the
// store's one process (rank 0's): N² values. A store that can do better (core's
// MeshGather: over the control mesh's links, log2 N steps, no rank serving more than its
// share) says so by implementing GathersAll.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"

namespace strata::bootstrap {

class GathersAll {
 public:
  virtual ~GathersAll() = default;
  // Values by rank of `name`'s exchange among `size` ranks, or nullopt when this one
  // cannot serve it (other ranks than its own take part), so the caller uses the store.
  virtual std::optional<std::vector<std::string>> allgather(const std::string& name, int rank, int size,
                                                            const std::string& mine, Clock::time_point deadline) = 0;
};

// Publishes `mine` as "<name>/<rank>" and returns every rank's value, by rank: through
// the store's own exchange where it has one, else set and get.
std::vector<std::string> allgather(Store& store, const std::string& name, int rank, int size, const std::string& mine,
                                   Clock::time_point deadline);

}  // namespace strata::bootstrap
