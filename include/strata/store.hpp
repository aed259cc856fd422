// The key-value store a communicator's ranks meet in at creation. strata brings its own
// (rank 0 or UniqueId::create serves it); a framework that already has one (torch's
// c10d::Store under torchrun, a FileStore, a prefix of either) hands it to the
// communicator instead, and no strata-specific address is needed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata {

class Store {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until every key exists. On timeout throws TimeoutError listing the missing
  // keys (strata names keys after ranks, so the error names the absent ranks).
  virtual std::vector<std::string> get(const std::vector<std::string>& keys, Clock::time_point deadline) = 0;
  std::string get(const std::string& key, Clock::time_point deadline) {
    return get(std::vector<std::string>{key}, deadline).front();
  }
  // Atomically adds delta and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
};

// A client of the strata rendezvous store at "host:port": a strata-store process (which
// outlives every rank, so grow() and join() can meet there), or UniqueId::create's.
// Retries the connection until `timeout` passes. Client and store prove to each other
// that they know the job's secret (STRATA_JOB_SECRET or STRATA_JOB_SECRET_FILE).
std::shared_ptr<Store> connect_store(const std::string& address,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(60));
// The same for the store UniqueId::create started, proving the id's own secret.
struct UniqueId;
std::shared_ptr<Store> connect_store(const UniqueId& id, std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace strata
