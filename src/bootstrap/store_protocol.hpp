// The rendezvous store's protocol without its sockets: frame lengths, the limits every
// length from the network is held to, and the state machine that turns one request into
// its response. tcp_store.cpp moves bytes; everything that reads them is here, where a
// fuzzer can drive it (tests/fuzz/fuzz_store.cpp).
//
// A frame is a 4-byte little-endian length and one serialized message
// (proto/bootstrap.proto: StoreRequest from clients, StoreResponse from the server).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap.pb.h"

namespace strata::bootstrap {

// What the store accepts. A job's records and addresses are a few hundred bytes per rank,
// so these leave room for jobs of tens of thousands of ranks while keeping rank 0's
// memory bounded whatever arrives on its port.
struct StoreLimits {
  std::size_t max_key = 4u << 10;
  std::size_t max_value = 1u << 20;
  std::size_t max_request = 4u << 20;   // one request frame
  std::size_t max_reply = 256u << 20;   // one response frame
  std::size_t max_stored = 512u << 20;  // keys and values held, all together
};

inline constexpr std::size_t kFrameHeaderBytes = 4;

std::string encode_frame(const google::protobuf::MessageLite& m);
std::uint32_t frame_length(const unsigned char* header);

// The store's contents and the rules for changing them. Not thread-safe: the server
// runs it on its one I/O thread.
class StoreState {
 public:
  explicit StoreState(StoreLimits limits = {}) : limits_(limits) {}

  struct Outcome {
    wire::StoreResponse response;
    // A GET whose keys are not all there yet: the server holds it and asks answer_get
    // again as keys arrive (or once more, final, when its time is up).
    bool hold = false;
    std::vector<std::string> keys;  // of a held GET
    std::uint32_t timeout_ms = 0;   // how long it may be held
    bool wakes_waiters = false;     // a SET: held GETs may now be answerable
  };
  // A request body as it came off the wire. A body that does not parse or breaks a
  // rule gets a response with `error` set; nothing is stored for it.
  Outcome handle(std::string_view body);
  // The response to a GET of `keys`, or nullopt while some are missing and !final.
  std::optional<wire::StoreResponse> answer_get(const std::vector<std::string>& keys, bool final) const;

  std::size_t stored_bytes() const { return stored_; }
  const StoreLimits& limits() const { return limits_; }

 private:
  Outcome refuse(const std::string& why) const;

  StoreLimits limits_;
  std::map<std::string, std::string> data_;
  std::map<std::string, std::int64_t> counters_;
  std::size_t stored_ = 0;
};

}  // namespace strata::bootstrap
