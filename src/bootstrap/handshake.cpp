#include "bootstrap/handshake.hpp"

#include <openssl/crypto.h>

#include <cstring>

#include "bootstrap/crypto.hpp"
#include "strata/errors.hpp"

namespace strata::bootstrap::auth {

namespace {

constexpr std::uint32_t kMagic = 0x53544155;  // "STAU"
constexpr std::uint16_t kVersion = 1;

void put_u32(unsigned char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u16(unsigned char* p, std::uint16_t v) {
  p[0] = static_cast<unsigned char>(v);
  p[1] = static_cast<unsigned char>(v >> 8);
}
std::uint32_t get_u32(const unsigned char* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}
std::uint16_t get_u16(const unsigned char* p) { return static_cast<std::uint16_t>(p[0] | p[1] << 8); }

void fresh_nonce(std::array<unsigned char, kNonceBytes>& n) { crypto::random_bytes(n); }

// MAC over a role label, the channel and the given parts in order. The label differs per
// direction, so a MAC one side sent can never pass as the other side's.
std::array<unsigned char, kMacBytes> mac(const JobSecret& s, const char* role, Channel c,
                                         std::initializer_list<std::span<const unsigned char>> parts) {
  Bytes msg(role, role + std::strlen(role) + 1);
  msg.push_back(static_cast<unsigned char>(static_cast<std::uint16_t>(c)));
  msg.push_back(static_cast<unsigned char>(static_cast<std::uint16_t>(c) >> 8));
  for (auto p : parts) msg.insert(msg.end(), p.begin(), p.end());
  return crypto::hmac_sha256(s.key, {msg});
}

constexpr const char* kAcceptorRole = "strata-auth-1 acceptor";
constexpr const char* kDialerRole = "strata-auth-1 dialer";

}  // namespace

const char* channel_name(Channel c) {
  switch (c) {
    case Channel::store: return "rendezvous store";
    case Channel::tcp: return "tcp transport";
    case Channel::wan: return "wan link";
    case Channel::mesh: return "control mesh";
    case Channel::plugin: return "nccl net plugin";
  }
  return "unknown channel";
}

Dialer::Dialer(const JobSecret& secret, Channel channel, Bytes payload)
    : secret_(secret), channel_(channel), payload_(std::move(payload)) {
  if (payload_.size() > kMaxPayload) throw InvalidArgument("handshake payload over " + std::to_string(kMaxPayload) + " bytes");
  fresh_nonce(nonce_);
  put_u32(hello_.data(), kMagic);
  put_u16(hello_.data() + 4, kVersion);
  put_u16(hello_.data() + 6, static_cast<std::uint16_t>(channel_));
  std::memcpy(hello_.data() + 8, nonce_.data(), kNonceBytes);
}

std::optional<Bytes> Dialer::answer(std::span<const unsigned char> challenge) {
  if (challenge.size() != kChallengeBytes) {
    why_ = "the challenge has " + std::to_string(challenge.size()) + " bytes, not " + std::to_string(kChallengeBytes);
    return std::nullopt;
  }
  const auto their_nonce = challenge.first(kNonceBytes);
  const auto expected = mac(secret_, kAcceptorRole, channel_, {nonce_, their_nonce});
  if (CRYPTO_memcmp(expected.data(), challenge.data() + kNonceBytes, kMacBytes) != 0) {
    why_ = "the listener does not know the job's secret (a stranger on this address, or another job)";
    return std::nullopt;
  }
  Bytes proof = payload_;
  const auto m = mac(secret_, kDialerRole, channel_, {their_nonce, nonce_, payload_});
  proof.insert(proof.end(), m.begin(), m.end());
  return proof;
}

Acceptor::Acceptor(const JobSecret& secret, Channel channel, std::size_t payload_bytes)
    : secret_(secret), channel_(channel), payload_bytes_(payload_bytes) {
  if (payload_bytes_ > kMaxPayload) throw InvalidArgument("handshake payload over " + std::to_string(kMaxPayload) + " bytes");
}

std::optional<std::array<unsigned char, kChallengeBytes>> Acceptor::challenge(std::span<const unsigned char> hello) {
  if (hello.size() != kHelloBytes || get_u32(hello.data()) != kMagic) {
    why_ = "it is not a strata handshake";
    return std::nullopt;
  }
  if (get_u16(hello.data() + 4) != kVersion) {
    why_ = "handshake version " + std::to_string(get_u16(hello.data() + 4)) + " (this build speaks " +
           std::to_string(kVersion) + ")";
    return std::nullopt;
  }
  const auto ch = get_u16(hello.data() + 6);
  if (ch != static_cast<std::uint16_t>(channel_)) {
    why_ = "it is for another kind of listener (channel " + std::to_string(ch) + ")";
    return std::nullopt;
  }
  std::memcpy(peer_nonce_.data(), hello.data() + 8, kNonceBytes);
  fresh_nonce(nonce_);
  std::array<unsigned char, kChallengeBytes> out{};
  std::memcpy(out.data(), nonce_.data(), kNonceBytes);
  const auto m = mac(secret_, kAcceptorRole, channel_, {peer_nonce_, nonce_});
  std::memcpy(out.data() + kNonceBytes, m.data(), kMacBytes);
  challenged_ = true;
  return out;
}

std::optional<Bytes> Acceptor::verify(std::span<const unsigned char> proof) {
  if (!challenged_) {
    why_ = "a proof before the hello";
    return std::nullopt;
  }
  if (proof.size() != proof_bytes()) {
    why_ = "the proof has " + std::to_string(proof.size()) + " bytes, not " + std::to_string(proof_bytes());
    return std::nullopt;
  }
  const auto payload = proof.first(payload_bytes_);
  const auto expected = mac(secret_, kDialerRole, channel_, {nonce_, peer_nonce_, payload});
  challenged_ = false;  // one proof per challenge
  if (CRYPTO_memcmp(expected.data(), proof.data() + payload_bytes_, kMacBytes) != 0) {
    why_ = "it does not know the job's secret";
    return std::nullopt;
  }
  return Bytes(payload.begin(), payload.end());
}

}  // namespace strata::bootstrap::auth
