// The job's handshake (bootstrap/handshake.hpp) as a listener and a dialer meet it from
// anything that connects. The first byte picks the channel and the payload size; then
// come a hello and a proof for the listener's side, and a challenge for the dialer's.
// Nothing may crash or read out of bounds, and no proof or challenge made without the
// secret may pass: a MAC over the other side's fresh nonce cannot be in the input. A
// genuine exchange with the input as payload must pass, and carry the payload exactly.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "bootstrap/handshake.hpp"

using namespace strata::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto channel = static_cast<auth::Channel>(1 + data[0] % 5);
  const std::size_t payload_bytes = (data[0] >> 3) % 17;
  std::span<const std::uint8_t> rest(data + 1, size - 1);
  auto take = [&rest](std::size_t n) {
    const auto part = rest.first(std::min(n, rest.size()));
    rest = rest.subspan(part.size());
    return part;
  };

  JobSecret secret;  // the open key: the fuzzer could know it, and still not forge a MAC
  auth::Acceptor listener(secret, channel, payload_bytes);
  const auto challenge = listener.challenge(take(auth::kHelloBytes));
  if (listener.verify(take(listener.proof_bytes()))) __builtin_trap();  // forged proof passed

  const auto payload = take(payload_bytes);
  auth::Dialer dialer(secret, channel, auth::Bytes(payload.begin(), payload.end()));
  if (dialer.answer(take(auth::kChallengeBytes))) __builtin_trap();  // forged challenge passed

  // A genuine exchange: passes, and a proof with one bit flipped does not.
  auth::Acceptor real(secret, channel, payload.size());
  const auto c = real.challenge(dialer.hello());
  if (!c) __builtin_trap();
  auto proof = dialer.answer(*c);
  if (!proof) __builtin_trap();
  auth::Acceptor again(secret, channel, payload.size());
  auto flipped = *proof;
  const auto c2 = again.challenge(dialer.hello());
  if (!c2) __builtin_trap();
  const auto got = real.verify(*proof);
  if (!got || !std::equal(got->begin(), got->end(), payload.begin(), payload.end())) __builtin_trap();
  flipped[(data[0] * 7u) % flipped.size()] ^= 1;
  if (again.verify(flipped)) __builtin_trap();  // wrong challenge and a flipped bit
  (void)challenge;
  return 0;
}
