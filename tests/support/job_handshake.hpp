// The dialer's side of the job's handshake (bootstrap/handshake.hpp) on a blocking socket,
// for tests that play a member of the job (one that knows the secret but then misbehaves)
// or a stranger that guesses the wrong secret.
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>

#include "base/asio.hpp"
#include "bootstrap/handshake.hpp"

namespace strata::test {

// Throws std::runtime_error when the listener does not know `secret` or closes.
inline void prove(boost::asio::ip::tcp::socket& s, const bootstrap::JobSecret& secret,
                  bootstrap::auth::Channel channel, bootstrap::auth::Bytes payload = {}) {
  bootstrap::auth::Dialer d(secret, channel, std::move(payload));
  boost::asio::write(s, boost::asio::buffer(d.hello()));
  std::array<unsigned char, bootstrap::auth::kChallengeBytes> challenge{};
  boost::asio::read(s, boost::asio::buffer(challenge));
  const auto proof = d.answer(challenge);
  if (!proof) throw std::runtime_error(d.why());
  boost::asio::write(s, boost::asio::buffer(*proof));
}

// A rank number as the TCP transport's and control mesh's proofs carry it; rank and
// stream as the WAN link's do.
inline bootstrap::auth::Bytes rank_payload(std::uint32_t rank) {
  bootstrap::auth::Bytes b(4);
  std::memcpy(b.data(), &rank, 4);
  return b;
}
inline bootstrap::auth::Bytes stream_payload(std::uint32_t rank, std::uint32_t stream) {
  bootstrap::auth::Bytes b(8);
  std::memcpy(b.data(), &rank, 4);
  std::memcpy(b.data() + 4, &stream, 4);
  return b;
}

}  // namespace strata::test
