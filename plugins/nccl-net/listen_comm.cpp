#include "listen_comm.hpp"

#include <cstring>

#include "errors.hpp"
#include "log.hpp"
#include "recv_comm.hpp"

namespace strata::nccl_net {

ListenComm::ListenComm(const Device& device, const Config& config)
    : Comm(Kind::listen), config_(config), device_(device.name) {
  std::uint16_t port = 0;
  fd_ = listen_on(device.addr, device.addr_len, &port);
  handle_ = make_handle(device.addr, port, random_u64(), config.region);
}

std::unique_ptr<RecvComm> ListenComm::accept() {
  for (;;) {
    Fd fd = accept_one(fd_.get());
    if (!fd) break;
    incoming_.push_back(Incoming{std::move(fd)});
  }
  for (std::size_t i = 0; i < incoming_.size();) {
    if (take(incoming_[i]))
      incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    if (it->second.arrived == it->second.first.stream_count) {
      auto comm = make_comm(it->second);
      groups_.erase(it);
      return comm;
    }
  }
  return nullptr;
}

bool ListenComm::take(Incoming& in) {
  bool eof = false;
  auto* raw = reinterpret_cast<char*>(&in.hello);
  try {
    in.got += recv_some(in.fd.get(), raw + in.got, sizeof(Hello) - in.got, &eof);
  } catch (const NetError& e) {
    log::warn("listen on %s: dropped a connection: %s", device_.c_str(), e.what());
    return true;
  }
  if (eof) return true;  // a stray connection (port scanner, health check): not ours
  if (in.got < sizeof(Hello)) return false;
  const Hello& h = in.hello;
  if (h.magic == Hello::kMagic && h.listen_nonce == handle_.nonce && h.version != Hello::kVersion)
    throw NetError(abi::invalid_usage, "the connecting rank runs another version of the plugin (hello v" +
                                           std::to_string(h.version) + ", this one speaks v" +
                                           std::to_string(Hello::kVersion) + ")");
  if (h.magic != Hello::kMagic || h.listen_nonce != handle_.nonce || h.stream_count == 0 ||
      h.stream_index >= h.stream_count || h.stream_count > 64) {
    log::warn("listen on %s: dropped a connection whose hello is not for this listener", device_.c_str());
    return true;
  }
  Group& g = groups_[h.conn_id];
  if (g.streams.empty()) {
    g.first = h;
    g.streams.resize(h.stream_count);
  }
  if (h.stream_count != g.first.stream_count || h.flags != g.first.flags || g.streams[h.stream_index]) {
    log::warn("listen on %s: dropped an inconsistent stream of connection %llx", device_.c_str(),
              static_cast<unsigned long long>(h.conn_id));
    return true;
  }
  g.streams[h.stream_index] = std::move(in.fd);
  ++g.arrived;
  return true;
}

std::unique_ptr<RecvComm> ListenComm::make_comm(Group& g) {
  const Hello& h = g.first;
  LinkOptions opt;
  opt.checksum = (h.flags & kChecksum) != 0;
  opt.acks = (h.flags & kAcks) != 0;
  opt.striped = opt.acks;
  if (opt.striped) {
    opt.delay = config_.emulation.delay;
    for (Fd& fd : g.streams) set_buffers(fd.get(), config_.socket_buffer);
  }
  char region[sizeof h.region + 1] = {};
  std::memcpy(region, h.region, sizeof h.region);
  sockaddr_storage from{};
  socklen_t from_len = sizeof from;
  ::getpeername(g.streams[0].get(), reinterpret_cast<sockaddr*>(&from), &from_len);
  const std::string peer = describe(from) + " (region '" + region + "') on " + device_;
  log::info("accepted %s connection from %s: %d stream(s)%s", opt.striped ? "striped" : "direct",
            peer.c_str(), h.stream_count, opt.checksum ? ", CRC32C frames, acks" : "");
  return std::make_unique<RecvComm>(std::move(g.streams), opt, peer);
}

}  // namespace strata::nccl_net
