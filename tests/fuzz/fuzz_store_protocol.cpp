// The rendezvous store's protocol as rank 0 reads it off a connection: a run of
// length-prefixed requests, each handled by one store, with limits small enough that the
// fuzzer reaches every one of them. Whatever arrives, the store never holds more than
// its limit and a reply never exceeds its own.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bootstrap/store_protocol.hpp"

using namespace strata::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  StoreLimits limits;
  limits.max_key = 64;
  limits.max_value = 4096;
  limits.max_request = 16u << 10;
  limits.max_reply = 8u << 10;
  limits.max_stored = 32u << 10;
  StoreState store(limits);
  std::size_t at = 0;
  while (at + kFrameHeaderBytes <= size) {
    std::size_t n = frame_length(data + at);
    at += kFrameHeaderBytes;
    if (n > limits.max_request) break;  // the server drops the connection here
    n = std::min(n, size - at);         // the input ends the request early
    StoreState::Outcome o = store.handle(std::string_view(reinterpret_cast<const char*>(data) + at, n));
    at += n;
    if (o.hold) {
      auto r = store.answer_get(o.keys, true);
      if (!r) std::abort();  // a final answer always exists
      o.response = *r;
    }
    if (store.stored_bytes() > limits.max_stored) std::abort();
    std::size_t values = 0;
    for (const auto& v : o.response.values()) values += v.size() + 8;
    if (values > limits.max_reply) std::abort();
    if (!o.response.ok() && o.response.values_size() != 0) std::abort();
  }
  return 0;
}
