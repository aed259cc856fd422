// The few primitives the job's handshake and secret need, made safe to call in a child
// forked while another thread of the parent was inside OpenSSL (test harnesses, and
// launchers that fork after starting a store thread): nonces come from getrandom(2), and
// SHA-256 uses an implementation fetched once when the library loads, so no call here
// takes OpenSSL's global locks, which a fork may have left held.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>

struct evp_md_ctx_st;

namespace strata::bootstrap::crypto {

using Digest = std::array<unsigned char, 32>;

// Throws Error(internal) if the kernel has no randomness to give.
void random_bytes(std::span<unsigned char> out);

// SHA-256 over pieces added in turn. Throws Error(internal) if OpenSSL cannot hash.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void add(std::span<const unsigned char> piece);
  void add(const void* data, std::size_t n) { add({static_cast<const unsigned char*>(data), n}); }
  Digest finish();

 private:
  evp_md_ctx_st* ctx_;
};

Digest sha256(std::initializer_list<std::span<const unsigned char>> parts);
// HMAC-SHA256 (RFC 2104) of the parts, concatenated, under a 32-byte key.
Digest hmac_sha256(std::span<const unsigned char, 32> key, std::initializer_list<std::span<const unsigned char>> parts);

}  // namespace strata::bootstrap::crypto
