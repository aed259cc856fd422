// Communicators that change members: grow/join, and the state sync joiners need
// (shrink lives in CommImpl, which owns the control mesh it meets over).

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "bootstrap/crypto.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "core/comm_impl.hpp"
#include "core/grow_places.hpp"
#include "core/link_settings.hpp"
#include "core/unique_id.hpp"
#include "core/world_join.hpp"
#include "strata/communicator.hpp"
#include "strata/errors.hpp"

namespace strata {

namespace {

std::shared_ptr<Store> generation_store(std::shared_ptr<Store> store, const std::string& generation, const char* who) {
  if (!store) throw InvalidArgument(std::string(who) + ": store is null");
  if (generation.empty() || generation.size() > 256 || generation.find('/') != std::string::npos)
    throw InvalidArgument(std::string(who) + ": generation '" + generation +
                          "' must be 1 to 256 characters without '/'");
  return std::make_shared<bootstrap::PrefixStore>(std::move(store), "grow/" + generation + "/");
}

std::string hex(const unsigned char* p, std::size_t n) {
  std::string s;
  char b[3];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

}  // namespace

std::shared_ptr<Store> connect_store(const UniqueId& id, std::chrono::milliseconds timeout) {
  const auto parsed = detail::parse_unique_id(id);
  const auto [host, port] = bootstrap::split_host_port(parsed.root, "unique id's store address");
  return std::make_shared<bootstrap::TcpStore>(host, port, Store::Clock::now() + timeout, parsed.secret,
                                               detail::socket_settings());
}

std::shared_ptr<Store> connect_store(const std::string& address, std::chrono::milliseconds timeout) {
  const auto [host, port] = bootstrap::split_host_port(address, "store address");
  return std::make_shared<bootstrap::TcpStore>(host, port, Store::Clock::now() + timeout,
                                               detail::configured_secret().value_or(bootstrap::JobSecret{}),
                                               detail::socket_settings());
}

Communicator Communicator::grow(std::shared_ptr<Store> store, int new_size, const std::string& generation,
                                const CommOptions& opts) {
  const std::string who = "grow on rank " + std::to_string(rank());
  if (new_size < size())
    throw InvalidArgument(who + ": new_size " + std::to_string(new_size) + " is smaller than the " + std::to_string(size()) +
                          " ranks already here (shrink() removes ranks)");
  auto gen_store = generation_store(std::move(store), generation, who.c_str());
  // The ranks here must agree, or some would wait in a rendezvous the others never join.
  const std::int64_t gen_hash = static_cast<std::int64_t>(std::hash<std::string>{}(generation) >> 1);
  std::int64_t mine[4] = {new_size, -new_size, gen_hash, -gen_hash};
  allreduce(mine, mine, 4, DataType::i64, ReduceOp::max).wait();
  if (mine[0] != -mine[1] || mine[2] != -mine[3])
    throw MismatchError(who + ": the ranks of this communicator called grow with different new sizes or generations "
                              "(this rank: " + std::to_string(new_size) + ", '" + generation + "')");
  CommOptions o = opts;
  if (o.transport == TransportKind::automatic) o.transport = transport();
  if (o.timeout.count() == 0) o.timeout = timeout();
  // Every new place gets a live joiner first (core/grow_places.hpp), then all meet.
  const auto deadline = Store::Clock::now() + o.timeout;
  detail::GrowPlaces places(*gen_store, size(), new_size);
  if (rank() == 0) {
    gen_store->set("old_size", std::to_string(size()));
    places.decide(deadline);
  } else {
    places.await(deadline);
  }
  detail::CommImpl::Setup s;
  s.rank = rank();
  s.size = new_size;
  s.store = gen_store;
  s.key_prefix = "strata/";
  s.options = o;
  // The ranks here keep their links; those a new rank brings are probed (rank 0 decides).
  s.figures = impl_->figures_for_children();
  return Communicator(std::make_unique<detail::CommImpl>(s));
}

Communicator Communicator::join(std::shared_ptr<Store> store, int rank, int new_size, const std::string& generation,
                                const CommOptions& opts) {
  const std::string who = "join";
  auto gen_store = generation_store(std::move(store), generation, who.c_str());
  const auto deadline = Store::Clock::now() + detail::resolve_timeout(opts.timeout);
  const int old_size = std::stoi(gen_store->get("old_size", deadline));
  if (old_size >= new_size)
    throw InvalidArgument(who + ": " + std::to_string(old_size) + " ranks grow to " + std::to_string(new_size) +
                          ": there is no new place");
  rank = detail::GrowPlaces(*gen_store, old_size, new_size).join(rank, deadline);
  return Communicator(gen_store, rank, new_size, opts);
}

std::string Communicator::share_state(std::span<const std::span<std::byte>> buffers, int root, bool residuals) {
  const std::string who = "share_state on rank " + std::to_string(rank());
  if (root < 0 || root >= size())
    throw InvalidArgument(who + ": root " + std::to_string(root) + " is out of range for " + std::to_string(size()) + " ranks");
  // Shapes first: a joiner whose buffers differ in shape is an error, not a truncation.
  std::uint64_t count = buffers.size();
  broadcast(&count, &count, 1, DataType::i64, root).wait();
  if (count != buffers.size())
    throw InvalidArgument(who + ": " + std::to_string(buffers.size()) + " buffers here but " + std::to_string(count) + " on root");
  std::vector<std::uint64_t> sizes, root_sizes;
  for (const auto& b : buffers) sizes.push_back(b.size());
  root_sizes = sizes;
  broadcast(root_sizes.data(), root_sizes.data(), root_sizes.size(), DataType::i64, root).wait();
  for (std::size_t i = 0; i < sizes.size(); ++i)
    if (root_sizes[i] != sizes[i])
      throw InvalidArgument(who + ": buffer " + std::to_string(i) + " has " + std::to_string(sizes[i]) + " bytes here but " +
                            std::to_string(root_sizes[i]) + " on root");
  for (const auto& b : buffers) broadcast(b.data(), b.data(), b.size(), DataType::u8, root).wait();

  bootstrap::crypto::Sha256 sha;
  for (const auto& b : buffers) sha.add(b.data(), b.size());
  if (residuals) {
    std::vector<std::byte> saved = rank() == root ? save_residuals() : std::vector<std::byte>{};
    std::uint64_t len = saved.size();
    broadcast(&len, &len, 1, DataType::i64, root).wait();
    saved.resize(len);
    broadcast(saved.data(), saved.data(), len, DataType::u8, root).wait();
    if (rank() != root) restore_residuals(saved);
    const auto again = save_residuals();  // what this rank now holds, not what it was sent
    sha.add(again.data(), again.size());
  }
  const auto digest = sha.finish();
  std::vector<unsigned char> all(digest.size() * static_cast<std::size_t>(size()));
  allgather(digest.data(), all.data(), digest.size(), DataType::u8).wait();
  const unsigned char* at_root = all.data() + digest.size() * static_cast<std::size_t>(root);
  std::string differ;
  for (int r = 0; r < size(); ++r)
    if (std::memcmp(all.data() + digest.size() * static_cast<std::size_t>(r), at_root, digest.size()) != 0)
      differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  if (!differ.empty())
    throw MismatchError(who + ": after the broadcast the state of rank(s) " + differ + " hashes differently from root " +
                        std::to_string(root) + "'s (" + hex(at_root, digest.size()) + ")");
  return hex(digest.data(), digest.size());
}

}  // namespace strata
