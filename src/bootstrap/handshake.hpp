// Proof that a new connection belongs to the job: a mutual challenge-response keyed by
// the job's secret (HMAC-SHA256), run before either side acts on anything else the
// connection carries. Pure (no sockets), so it is fuzzed directly; auth_gate.hpp runs
// it over a socket.
//
//   dialer   -> acceptor  hello:     magic "STAU", version, channel, nonce_d[16]      (24 B)
//   acceptor -> dialer    challenge: nonce_a[16], MAC_a(channel, nonce_d, nonce_a)    (48 B)
//   dialer   -> acceptor  proof:     payload[n], MAC_d(channel, nonce_a, nonce_d, payload)
//
// The dialer checks MAC_a before it sends its proof, so neither side talks to an impostor
// beyond the hello; fresh nonces on both sides make an old exchange worthless to replay;
// the channel and the role are in every MAC, so a proof for one listener (or direction)
// is refused by another. The payload (the dialer's rank, stream, ...) is covered by the
// MAC, so nobody can change what an authenticated connection claims to be.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/job_secret.hpp"

namespace strata::bootstrap::auth {

enum class Channel : std::uint16_t { store = 1, tcp = 2, wan = 3, mesh = 4, plugin = 5 };
const char* channel_name(Channel c);

constexpr std::size_t kNonceBytes = 16;
constexpr std::size_t kMacBytes = 32;
constexpr std::size_t kHelloBytes = 8 + kNonceBytes;
constexpr std::size_t kChallengeBytes = kNonceBytes + kMacBytes;
constexpr std::size_t kMaxPayload = 256;

using Bytes = std::vector<unsigned char>;

class Dialer {
 public:
  // payload: at most kMaxPayload bytes, the length the acceptor of `channel` expects.
  Dialer(const JobSecret& secret, Channel channel, Bytes payload);
  const std::array<unsigned char, kHelloBytes>& hello() const { return hello_; }
  // The acceptor's challenge (kChallengeBytes) → the proof to send; nullopt when the
  // acceptor does not know the secret (why() says so).
  std::optional<Bytes> answer(std::span<const unsigned char> challenge);
  const std::string& why() const { return why_; }

 private:
  JobSecret secret_;
  Channel channel_;
  Bytes payload_;
  std::array<unsigned char, kNonceBytes> nonce_{};
  std::array<unsigned char, kHelloBytes> hello_{};
  std::string why_;
};

class Acceptor {
 public:
  Acceptor(const JobSecret& secret, Channel channel, std::size_t payload_bytes);
  // The dialer's hello (kHelloBytes) → the challenge to send; nullopt when it is not a
  // strata hello for this channel and version.
  std::optional<std::array<unsigned char, kChallengeBytes>> challenge(std::span<const unsigned char> hello);
  std::size_t proof_bytes() const { return payload_bytes_ + kMacBytes; }
  // The dialer's proof (proof_bytes()) → its payload, now trusted; nullopt when the MAC is
  // wrong (the dialer does not know the job's secret).
  std::optional<Bytes> verify(std::span<const unsigned char> proof);
  const std::string& why() const { return why_; }

 private:
  JobSecret secret_;
  Channel channel_;
  std::size_t payload_bytes_;
  std::array<unsigned char, kNonceBytes> nonce_{};
  std::array<unsigned char, kNonceBytes> peer_nonce_{};
  bool challenged_ = false;
  std::string why_;
};

}  // namespace strata::bootstrap::auth
