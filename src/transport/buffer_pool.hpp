// Memory the copying transports (TCP, the WAN link) reuse for what they hold on behalf of
// someone else: messages that arrived before their receive, and the WAN link's copies of
// sends it completed early. Kept after use up to a bound, because a steady stream of
// large messages then reuses pages already mapped instead of faulting in fresh ones for
// every copy (the allocator returns large blocks to the kernel on free), which on a fast
// link costs more than the copy itself.
#pragma once

#include <cstddef>
#include <map>
#include <memory>

namespace strata::transport {

class BufferPool {
 public:
  struct Buffer {
    std::unique_ptr<char[]> data;
    std::size_t capacity = 0;
  };
  // keep: bytes the pool may hold between uses.
  explicit BufferPool(std::size_t keep) : keep_(keep) {}
  // A buffer of at least n bytes (one byte for n = 0): a pooled one no larger than 2n,
  // else a new one.
  Buffer take(std::size_t n);
  // Back into the pool while it holds no more than `keep`; freed otherwise.
  void give(Buffer b);

 private:
  static constexpr std::size_t kSmall = 256u << 10;  // the allocator serves these cheaply
  std::multimap<std::size_t, std::unique_ptr<char[]>> free_;
  std::size_t held_ = 0;
  std::size_t keep_;
};

}  // namespace strata::transport
