// UniqueId: "strata2|host:port|secret" in 128 bytes (the secret as 64 hex digits; its
// first 16 name the communicator's keys in the store). Creating one starts a store
// server that lives as long as the creating process, as ncclGetUniqueId's bootstrap root
// does, and admits only clients that know the id's secret: the id is the job's key.
#include "core/unique_id.hpp"
#include "core/link_settings.hpp"

#include <netdb.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "core/config.hpp"
#include "bootstrap/tcp_store.hpp"
#include "strata/errors.hpp"

namespace strata {

namespace {

constexpr const char* kMagic = "strata2";

// A non-loopback IPv4 address of this host if there is one, so ids work across hosts.
std::string advertised_host() {
  const std::string configured = config::get(config::socket_ifaddr);
  if (!configured.empty()) return configured;
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string best = "127.0.0.1";
  if (::getaddrinfo(name, nullptr, &hints, &res) == 0) {
    for (auto* a = res; a; a = a->ai_next) {
      char buf[64];
      if (::getnameinfo(a->ai_addr, a->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) == 0 &&
          std::strncmp(buf, "127.", 4) != 0) {
        best = buf;
        break;
      }
    }
    ::freeaddrinfo(res);
  }
  return best;
}

std::mutex g_servers_mu;
std::vector<std::unique_ptr<bootstrap::StoreServer>>& servers() {
  static std::vector<std::unique_ptr<bootstrap::StoreServer>> s;
  return s;
}

}  // namespace

UniqueId UniqueId::create() {
  const std::string host = advertised_host();
  const auto secret = bootstrap::JobSecret::random();
  auto server = std::make_unique<bootstrap::StoreServer>(host, 0, secret,
                                                         bootstrap::StoreServerLimits::with(detail::socket_settings()));
  const std::string text = std::string(kMagic) + "|" + host + ":" + std::to_string(server->port()) + "|" + secret.hex();
  if (text.size() >= UniqueId{}.bytes.size())
    throw InvalidArgument("UniqueId::create: the address " + host + " is too long to fit an id");
  {
    std::lock_guard<std::mutex> lock(g_servers_mu);
    servers().push_back(std::move(server));
  }
  UniqueId id;
  std::memcpy(id.bytes.data(), text.data(), std::min(text.size(), id.bytes.size() - 1));
  return id;
}

std::string UniqueId::root() const { return detail::parse_unique_id(*this).root; }

namespace detail {

ParsedId parse_unique_id(const UniqueId& id) {
  const std::string text(id.bytes.data(), strnlen(id.bytes.data(), id.bytes.size()));
  const auto a = text.find('|');
  const auto b = text.find('|', a == std::string::npos ? 0 : a + 1);
  const auto secret = b == std::string::npos ? std::nullopt : bootstrap::JobSecret::from_hex(text.substr(b + 1));
  if (a == std::string::npos || b == std::string::npos || text.substr(0, a) != kMagic || !secret)
    throw InvalidArgument("unique id: not created by UniqueId::create of this strata version (or corrupted in transit)");
  return ParsedId{text.substr(a + 1, b - a - 1), text.substr(b + 1, 16), *secret};
}

}  // namespace detail

}  // namespace strata
