#include "bootstrap/gather.hpp"

namespace strata::bootstrap {

std::vector<std::string> allgather(Store& store, const std::string& name, int rank, int size, const std::string& mine,
                                   Clock::time_point deadline) {
  if (auto* gathers = dynamic_cast<GathersAll*>(&store))
    if (auto values = gathers->allgather(name, rank, size, mine, deadline)) return std::move(*values);
  store.set(name + "/" + std::to_string(rank), mine);
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) keys.push_back(name + "/" + std::to_string(r));
  return store.get(keys, deadline);
}

}  // namespace strata::bootstrap
