// Key-value rendezvous used at communicator creation: ranks publish their locality and
// transport addresses and read everyone else's. Rank 0 (or UniqueId::create) serves it,
// or the caller brings its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/store.hpp"

namespace strata::bootstrap {

using Clock = std::chrono::steady_clock;

// The public interface (include/strata/store.hpp), so a framework's own store can stand
// in for the ones below.
using Store = strata::Store;

// A store that knows the local address its ranks reach each other from (the interface of
// its own connection); transports listen there (transport/address_exchange.hpp).
class KnowsLocalAddress {
 public:
  virtual ~KnowsLocalAddress() = default;
  virtual std::string local_address() const = 0;
};

// Prefixes every key, so several communicators can share one store.
class PrefixStore : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::string& value) override {
    inner_->set(prefix_ + key, value);
  }
  std::vector<std::string> get(const std::vector<std::string>& keys,
                               Clock::time_point deadline) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const auto& k : keys) full.push_back(prefix_ + k);
    return inner_->get(full, deadline);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return inner_->add(prefix_ + key, delta);
  }
  using Store::get;
  Store* inner() const { return inner_.get(); }

 private:
  std::shared_ptr<Store> inner_;
  std::string prefix_;
};

}  // namespace strata::bootstrap
