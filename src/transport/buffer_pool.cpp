#include "transport/buffer_pool.hpp"

namespace strata::transport {

BufferPool::Buffer BufferPool::take(std::size_t n) {
  if (n >= kSmall) {
    const auto it = free_.lower_bound(n);
    if (it != free_.end() && it->first <= 2 * n) {
      Buffer b{std::move(it->second), it->first};
      held_ -= it->first;
      free_.erase(it);
      return b;
    }
  }
  return Buffer{std::unique_ptr<char[]>(new char[n ? n : 1]), n};
}

void BufferPool::give(Buffer b) {
  if (!b.data || b.capacity < kSmall || held_ + b.capacity > keep_) return;
  held_ += b.capacity;
  free_.emplace(b.capacity, std::move(b.data));
}

}  // namespace strata::transport
