#include "transport/address_exchange.hpp"

#include "bootstrap/gather.hpp"

namespace strata::transport {

std::string listen_host(bootstrap::Store& store, const std::string& configured) {
  if (!configured.empty()) return configured;
  // A grown communicator's store is a prefix of a prefix (grow/<generation>/, then its
  // own keys): the address is the store client's underneath them all.
  auto* s = &store;
  while (auto* prefixed = dynamic_cast<bootstrap::PrefixStore*>(s)) s = prefixed->inner();
  if (auto* knows = dynamic_cast<bootstrap::KnowsLocalAddress*>(s)) return knows->local_address();
  return "127.0.0.1";
}

std::vector<std::string> exchange_addresses(bootstrap::Store& store, const std::string& kind,
                                            int rank, int size, const std::string& mine,
                                            Clock::time_point deadline) {
  return bootstrap::allgather(store, kind, rank, size, mine, deadline);
}

}  // namespace strata::transport
