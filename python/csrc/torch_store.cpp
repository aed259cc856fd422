#include "torch_store.hpp"

#include <algorithm>

#include "strata/errors.hpp"

namespace strata::torch_backend {

void TorchStore::set(const std::string& key, const std::string& value) {
  store_->set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
}

std::vector<std::string> TorchStore::get(const std::vector<std::string>& keys, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  try {
    store_->wait(keys, std::max(left, std::chrono::milliseconds(1)));
  } catch (const c10::Error&) {
    // Name what is missing the way strata's own store does: keys carry rank numbers.
    std::string missing;
    for (const auto& k : keys)
      if (!store_->check({k})) missing += (missing.empty() ? "" : ", ") + k;
    if (missing.empty()) throw;
    throw TimeoutError("timed out waiting in the torch store for keys " + missing);
  }
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) {
    const auto v = store_->get(k);
    out.emplace_back(v.begin(), v.end());
  }
  return out;
}

std::int64_t TorchStore::add(const std::string& key, std::int64_t delta) { return store_->add(key, delta); }

}  // namespace strata::torch_backend
