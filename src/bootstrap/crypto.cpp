#include "bootstrap/crypto.hpp"

#include <openssl/evp.h>
#include <sys/random.h>

#include <cerrno>

#include "strata/errors.hpp"

namespace strata::bootstrap::crypto {

namespace {

// Fetched while the library loads, before any thread of this process can hold a lock.
const EVP_MD* const g_sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);

[[noreturn]] void hash_failed() { throw Error(ErrorCode::internal, "SHA-256 (OpenSSL) unavailable"); }

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!g_sha256 || !ctx_ || EVP_DigestInit_ex2(ctx_, g_sha256, nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    hash_failed();
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::add(std::span<const unsigned char> p) {
  if (!p.empty() && EVP_DigestUpdate(ctx_, p.data(), p.size()) != 1) hash_failed();
}

Digest Sha256::finish() {
  Digest out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_, out.data(), &len) != 1 || len != out.size()) hash_failed();
  return out;
}

void random_bytes(std::span<unsigned char> out) {
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::getrandom(out.data() + got, out.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(ErrorCode::internal, "getrandom failed: no random bytes for the job's handshake");
    got += static_cast<std::size_t>(n);
  }
}

Digest sha256(std::initializer_list<std::span<const unsigned char>> parts) {
  Sha256 h;
  for (auto p : parts) h.add(p);
  return h.finish();
}

Digest hmac_sha256(std::span<const unsigned char, 32> key, std::initializer_list<std::span<const unsigned char>> parts) {
  constexpr std::size_t kBlock = 64;  // SHA-256's block; a 32-byte key is zero-padded to it
  std::array<unsigned char, kBlock> ipad{}, opad{};
  for (std::size_t i = 0; i < kBlock; ++i) {
    const unsigned char k = i < key.size() ? key[i] : 0;
    ipad[i] = static_cast<unsigned char>(k ^ 0x36);
    opad[i] = static_cast<unsigned char>(k ^ 0x5c);
  }
  Sha256 inner;
  inner.add(ipad);
  for (auto p : parts) inner.add(p);
  const Digest d = inner.finish();
  return sha256({opad, d});
}

}  // namespace strata::bootstrap::crypto
