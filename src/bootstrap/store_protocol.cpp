#include "bootstrap/store_protocol.hpp"

namespace strata::bootstrap {

std::string encode_frame(const google::protobuf::MessageLite& m) {
  const std::string body = m.SerializeAsString();
  const auto n = static_cast<std::uint32_t>(body.size());
  std::string out(kFrameHeaderBytes, '\0');
  for (std::size_t i = 0; i < kFrameHeaderBytes; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + body;
}

std::uint32_t frame_length(const unsigned char* h) {
  return h[0] | (h[1] << 8) | (h[2] << 16) | (static_cast<std::uint32_t>(h[3]) << 24);
}

StoreState::Outcome StoreState::refuse(const std::string& why) const {
  Outcome o;
  o.response.set_ok(false);
  o.response.set_error(why);
  return o;
}

StoreState::Outcome StoreState::handle(std::string_view body) {
  if (body.size() > limits_.max_request)
    return refuse("request of " + std::to_string(body.size()) + " bytes exceeds the store's " +
                  std::to_string(limits_.max_request) + "-byte limit");
  wire::StoreRequest req;
  if (!req.ParseFromArray(body.data(), static_cast<int>(body.size()))) return refuse("malformed request");
  for (const auto& k : req.keys())
    if (k.size() > limits_.max_key)
      return refuse("key of " + std::to_string(k.size()) + " bytes exceeds the " +
                    std::to_string(limits_.max_key) + "-byte limit");
  Outcome o;
  switch (req.op()) {
    case wire::StoreRequest::SET: {
      if (req.keys_size() != 1) return refuse("SET takes exactly one key");
      const std::string& key = req.keys(0);
      if (req.value().size() > limits_.max_value)
        return refuse("value of " + std::to_string(req.value().size()) + " bytes for key '" + key +
                      "' exceeds the " + std::to_string(limits_.max_value) + "-byte limit");
      const auto it = data_.find(key);
      const std::size_t old = it == data_.end() ? 0 : key.size() + it->second.size();
      const std::size_t now = key.size() + req.value().size();
      if (stored_ - old + now > limits_.max_stored)
        return refuse("the store is full: it holds " + std::to_string(stored_) + " bytes of at most " +
                      std::to_string(limits_.max_stored));
      data_[key] = req.value();
      stored_ = stored_ - old + now;
      o.response.set_ok(true);
      o.wakes_waiters = true;
      return o;
    }
    case wire::StoreRequest::ADD: {
      if (req.keys_size() != 1) return refuse("ADD takes exactly one key");
      const std::string& key = req.keys(0);
      auto it = counters_.find(key);
      if (it == counters_.end()) {
        if (stored_ + key.size() + sizeof(std::int64_t) > limits_.max_stored)
          return refuse("the store is full: it holds " + std::to_string(stored_) + " bytes of at most " +
                        std::to_string(limits_.max_stored));
        stored_ += key.size() + sizeof(std::int64_t);
        it = counters_.emplace(key, 0).first;
      }
      // Wraps like the two's-complement machines every rank runs on, without overflow UB.
      it->second = static_cast<std::int64_t>(static_cast<std::uint64_t>(it->second) +
                                             static_cast<std::uint64_t>(req.delta()));
      o.response.set_ok(true);
      o.response.set_counter(it->second);
      return o;
    }
    case wire::StoreRequest::GET: {
      o.keys.assign(req.keys().begin(), req.keys().end());
      auto r = answer_get(o.keys, false);
      if (r) {
        o.response = std::move(*r);
        return o;
      }
      o.hold = true;
      o.timeout_ms = req.timeout_ms();
      return o;
    }
    default:
      return refuse("unknown operation " + std::to_string(static_cast<int>(req.op())));
  }
}

std::optional<wire::StoreResponse> StoreState::answer_get(const std::vector<std::string>& keys, bool final) const {
  wire::StoreResponse resp;
  std::size_t bytes = 0;
  for (const auto& k : keys) {
    auto it = data_.find(k);
    if (it == data_.end()) {
      resp.add_missing(k);
    } else {
      bytes += it->second.size() + 8;
      if (bytes > limits_.max_reply) {
        wire::StoreResponse too_big;
        too_big.set_ok(false);
        too_big.set_error("the values of " + std::to_string(keys.size()) + " keys exceed the store's " +
                          std::to_string(limits_.max_reply) + "-byte reply limit");
        return too_big;
      }
      resp.add_values(it->second);
    }
  }
  if (resp.missing_size() > 0 && !final) return std::nullopt;
  resp.set_ok(resp.missing_size() == 0);
  if (!resp.ok()) resp.clear_values();
  return resp;
}

}  // namespace strata::bootstrap
