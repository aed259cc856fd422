#include "core/mesh_gather.hpp"

#include <cstdint>
#include <cstring>

#include "strata/errors.hpp"
#include "transport/address_exchange.hpp"

namespace strata::detail {

namespace {

// A control frame holds 1 MiB: larger sets go in parts.
constexpr std::size_t kPartBytes = 256u << 10;

void put_u32(std::string& s, std::uint32_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }

std::uint32_t get_u32(const std::string& s, std::size_t& at, int from) {
  std::uint32_t v = 0;
  if (s.size() - at < sizeof v)
    throw TransportError("communicator creation: the values gathered from rank " + std::to_string(from) +
                         " over the control mesh end early");
  std::memcpy(&v, s.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

}  // namespace

std::vector<int> gather_steps(int size) {
  std::vector<int> steps;
  long long w = 1;  // how many consecutive ranks' values each rank knows
  while (w < size) {
    const long long d = 2 * w <= size ? w : (size + 1) / 2;
    steps.push_back(static_cast<int>(d));
    w += d;
  }
  return steps;
}

std::string encode_known(const std::vector<std::optional<std::string>>& known) {
  std::string out;
  for (std::size_t r = 0; r < known.size(); ++r) {
    if (!known[r]) continue;
    put_u32(out, static_cast<std::uint32_t>(r));
    put_u32(out, static_cast<std::uint32_t>(known[r]->size()));
    out += *known[r];
  }
  return out;
}

void parse_known(const std::string& bytes, int size, int from, std::vector<std::optional<std::string>>& known) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    const auto r = get_u32(bytes, at, from);
    const auto len = get_u32(bytes, at, from);
    if (r >= static_cast<std::uint32_t>(size) || len > bytes.size() - at)
      throw TransportError("communicator creation: rank " + std::to_string(from) +
                           " sent a malformed set of values over the control mesh (rank " + std::to_string(r) +
                           ", " + std::to_string(len) + " bytes)");
    if (!known[r]) known[r] = bytes.substr(at, len);
    at += len;
  }
}

std::string MeshGather::local_address() const { return transport::listen_host(inner_, ""); }

std::optional<std::vector<std::string>> MeshGather::allgather(const std::string& name, int rank, int size,
                                                              const std::string& mine, Clock::time_point deadline) {
  if (rank != rank_ || size != size_) return std::nullopt;
  std::vector<std::optional<std::string>> known(static_cast<std::size_t>(size));
  known[static_cast<std::size_t>(rank)] = mine;
  const auto steps = gather_steps(size);
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const int d = steps[k];
    const int to = (rank + d) % size, from = (rank - d + size) % size;
    const std::string base = "gather/" + name + "/" + std::to_string(k) + "/";
    // Parts of at most kPartBytes; the first says how many there are.
    const std::string all = encode_known(known);
    const std::size_t parts = std::max<std::size_t>(1, (all.size() + kPartBytes - 1) / kPartBytes);
    for (std::size_t p = 0; p < parts; ++p) {
      std::string v;
      if (p == 0) put_u32(v, static_cast<std::uint32_t>(parts));
      v += all.substr(p * kPartBytes, kPartBytes);
      const std::string key = base + std::to_string(to) + "/" + std::to_string(p);
      mesh_.put(key, v, {to});
      mesh_.forget({key});  // put() keeps a copy here too
    }
    const std::string theirs = base + std::to_string(rank) + "/";
    std::string first = mesh_.wait({theirs + "0"}, deadline, {from}).front();
    mesh_.forget({theirs + "0"});
    std::size_t at = 0;
    const auto count = get_u32(first, at, from);
    // What `from` can send: every rank's value, in parts of kPartBytes, each
    // bounded by the control frame.
    if (count == 0 || count > (bootstrap::kMaxControlTable / kPartBytes))
      throw TransportError("communicator creation: rank " + std::to_string(from) + " announced " +
                           std::to_string(count) + " parts of gathered values over the control mesh");
    std::string received = first.substr(at);
    for (std::uint32_t p = 1; p < count; ++p) {
      const std::string key = theirs + std::to_string(p);
      received += mesh_.wait({key}, deadline, {from}).front();
      mesh_.forget({key});
    }
    parse_known(received, size, from, known);
  }
  std::vector<std::string> out;
  out.reserve(known.size());
  for (std::size_t r = 0; r < known.size(); ++r) {
    if (!known[r])
      throw TransportError("communicator creation: the exchange of '" + name + "' over the control mesh lacks rank " +
                           std::to_string(r));
    out.push_back(std::move(*known[r]));
  }
  return out;
}

}  // namespace strata::detail
