#include "handle.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>

#include <cstring>
#include <mutex>
#include <random>

#include "errors.hpp"

namespace strata::nccl_net {

std::uint64_t region_hash(const std::string& region) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : region) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::uint64_t random_u64() {
  std::uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof v) && v != 0) return v;
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mu);
  do v = rng(); while (v == 0);
  return v;
}

ListenHandle make_handle(const sockaddr_storage& addr, std::uint16_t port, std::uint64_t nonce,
                         const std::string& region, const std::string& advertise) {
  ListenHandle h{};
  h.magic = ListenHandle::kMagic;
  h.version = ListenHandle::kVersion;
  h.family = addr.ss_family;
  h.port = port;
  if (addr.ss_family == AF_INET)
    std::memcpy(h.addr, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, 4);
  else
    std::memcpy(h.addr, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, 16);
  if (!advertise.empty()) {
    if (::inet_pton(AF_INET, advertise.c_str(), h.public_addr) == 1)
      h.public_family = AF_INET;
    else if (::inet_pton(AF_INET6, advertise.c_str(), h.public_addr) == 1)
      h.public_family = AF_INET6;
  }
  h.nonce = nonce;
  h.region_hash = region_hash(region);
  std::strncpy(h.region, region.c_str(), sizeof h.region - 1);
  return h;
}

HelloVerdict check_hello(const Hello& h, std::uint64_t listen_nonce) {
  if (h.magic == Hello::kMagic && h.listen_nonce == listen_nonce && h.version != Hello::kVersion)
    return HelloVerdict::other_version;
  if (h.magic != Hello::kMagic || h.listen_nonce != listen_nonce || h.stream_count == 0 ||
      h.stream_index >= h.stream_count || h.stream_count > 64 ||
      ((h.flags & kUcx) && (h.stream_count != 1 || (h.flags & kAcks))))
    return HelloVerdict::not_ours;
  return HelloVerdict::ours;
}

bool plausible(const UcxAddressHeader& h) {
  return h.magic == UcxAddressHeader::kMagic && h.length != 0 && h.length <= UcxAddressHeader::kMaxAddress;
}

void check_handle(const ListenHandle& h) {
  if (h.magic != ListenHandle::kMagic || h.version != ListenHandle::kVersion ||
      (h.family != AF_INET && h.family != AF_INET6) || h.port == 0 || h.nonce == 0)
    throw NetError(abi::invalid_argument, "connection handle was not written by this plugin's listen");
}

socklen_t handle_address(const ListenHandle& h, sockaddr_storage* out, bool same_region) {
  *out = {};
  const bool advertised = !same_region && (h.public_family == AF_INET || h.public_family == AF_INET6);
  const auto family = advertised ? h.public_family : h.family;
  const unsigned char* raw = advertised ? h.public_addr : h.addr;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(out);
    a->sin_family = AF_INET;
    a->sin_port = htons(h.port);
    std::memcpy(&a->sin_addr, raw, 4);
    return sizeof(sockaddr_in);
  }
  auto* a = reinterpret_cast<sockaddr_in6*>(out);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(h.port);
  std::memcpy(&a->sin6_addr, raw, 16);
  return sizeof(sockaddr_in6);
}

}  // namespace strata::nccl_net
