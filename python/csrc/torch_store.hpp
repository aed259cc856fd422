// strata's rendezvous over the c10d::Store torch hands a backend (TCPStore, FileStore,
// or a PrefixStore of either for a subgroup), so torchrun, tcp://, file:// and env://
// need no strata-specific address.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "strata/store.hpp"

namespace strata::torch_backend {

class TorchStore : public strata::Store {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::string& value) override;
  std::vector<std::string> get(const std::vector<std::string>& keys, Clock::time_point deadline) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace strata::torch_backend
