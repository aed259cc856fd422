#include "listen_comm.hpp"

#include <cstring>

#include "errors.hpp"
#include "log.hpp"
#include "recv_comm.hpp"

namespace strata::nccl_net {

namespace {

std::string remote_of(int fd) {
  sockaddr_storage from{};
  socklen_t len = sizeof from;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&from), &len) != 0) return "an unknown peer";
  return describe(from);
}

}  // namespace

ListenComm::ListenComm(const Device& device, const Config& config)
    : Comm(Kind::listen), config_(config), device_(device.name) {
  std::uint16_t port = 0;
  fd_ = listen_on(device.addr, device.addr_len, config.ports, "NCCL net plugin", &port);
  handle_ = make_handle(device.addr, port, random_u64(), config.region, config.advertise);
}

TransferCommPtr ListenComm::accept() {
  for (;;) {
    Fd fd = accept_one(fd_.get());
    if (!fd) break;
    incoming_.push_back(Incoming{std::move(fd), Clock::now() + config_.connect_timeout});
  }
  for (std::size_t i = 0; i < incoming_.size();) {
    bool consumed = true;
    try {
      consumed = take(incoming_[i]);
    } catch (...) {
      incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
      throw;
    }
    if (consumed)
      incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
  for (auto it = groups_.begin(); it != groups_.end();) {
    TransferCommPtr comm;
    try {
      comm = finish(it->second);
      if (!comm && !it->second.dropped && Clock::now() > it->second.deadline)
        system_failure("connection " + describe_peer(it->second) + " still incomplete after " +
                       std::to_string(config_.connect_timeout.count()) + " s (STRATA_NET_CONNECT_TIMEOUT_S)");
    } catch (...) {
      groups_.erase(it);
      throw;
    }
    if (comm) {
      groups_.erase(it);
      return comm;
    }
    it = it->second.dropped ? groups_.erase(it) : std::next(it);
  }
  return nullptr;
}

bool ListenComm::take(Incoming& in) {
  switch (in.auth.step(in.fd.get())) {
    case AcceptAuth::State::pending:
      if (Clock::now() <= in.deadline) return false;
      log::warn("listen on %s: dropped a connection from %s that did not prove itself in %lld s", device_.c_str(),
                remote_of(in.fd.get()).c_str(), static_cast<long long>(config_.connect_timeout.count()));
      return true;
    case AcceptAuth::State::refused:
      log::warn("listen on %s: refused a connection from %s: %s", device_.c_str(), remote_of(in.fd.get()).c_str(),
                in.auth.why().c_str());
      return true;
    case AcceptAuth::State::older_plugin:
      throw NetError(abi::invalid_usage, "the connecting rank runs another version of the plugin (one without the "
                                         "job's handshake; this one speaks hello v" +
                                             std::to_string(Hello::kVersion) + ")");
    case AcceptAuth::State::proven:
      break;
  }
  const Hello& h = in.auth.hello();
  switch (check_hello(h, handle_.nonce)) {
    case HelloVerdict::other_version:
      throw NetError(abi::invalid_usage, "the connecting rank runs another version of the plugin (hello v" +
                                             std::to_string(h.version) + ", this one speaks v" +
                                             std::to_string(Hello::kVersion) + ")");
    case HelloVerdict::not_ours:
      log::warn("listen on %s: dropped a connection whose hello is not for this listener", device_.c_str());
      return true;
    case HelloVerdict::ours:
      break;
  }
  const bool striped = (h.flags & kAcks) != 0, tls = (h.flags & kTls) != 0;
  if (striped && tls != (plugin_tls() != nullptr))
    throw NetError(abi::invalid_usage,
                   tls ? "the connecting rank runs its striped streams in TLS (STRATA_WAN_TLS=1) and this one does "
                         "not: set STRATA_WAN_TLS alike on every rank"
                       : "STRATA_WAN_TLS=1 here, and the connecting rank would send its striped streams in clear "
                         "text: set STRATA_WAN_TLS alike on every rank");
  Group& g = groups_[h.conn_id];
  if (g.streams.empty()) {
    g.first = h;
    g.streams.resize(h.stream_count);
    g.deadline = in.deadline;
  }
  if (h.stream_count != g.first.stream_count || h.flags != g.first.flags || g.streams[h.stream_index]) {
    log::warn("listen on %s: dropped an inconsistent stream of connection %llx", device_.c_str(),
              static_cast<unsigned long long>(h.conn_id));
    return true;
  }
  g.streams[h.stream_index] = Wire(std::move(in.fd));
  ++g.arrived;
  return true;
}

TransferCommPtr ListenComm::finish(Group& g) {
  if (g.first.flags & kTls) {
    if (!shake_hands(g)) return nullptr;
  } else if (g.arrived < g.first.stream_count) {
    return nullptr;
  }
  if (!(g.first.flags & kUcx)) return make_tcp_comm(g, describe_peer(g));
  if (!g.answer) {
    std::string peer = describe_peer(g);
    g.answer = std::make_unique<UcxAnswer>(g.streams[0].take_fd(), std::move(peer));
  }
  return g.answer->step();
}

bool ListenComm::shake_hands(Group& g) {
  bool all = g.arrived == g.first.stream_count;
  try {
    for (Wire& w : g.streams) {
      if (!w) continue;
      if (!w.tls()) w.start_tls(plugin_tls(), false);
      all &= w.handshake(describe_peer(g));
    }
  } catch (const NetError& e) {
    log::warn("listen on %s: dropped a connection: %s", device_.c_str(), e.what());
    g.dropped = true;
    return false;
  }
  return all;
}

std::string ListenComm::describe_peer(const Group& g) const {
  char region[sizeof g.first.region + 1] = {};
  std::memcpy(region, g.first.region, sizeof g.first.region);
  const std::string from = g.streams.empty() || !g.streams[0] ? "?" : remote_of(g.streams[0].fd());
  return from + " (region '" + region + "') on " + device_;
}

TransferCommPtr ListenComm::make_tcp_comm(Group& g, const std::string& peer) {
  const Hello& h = g.first;
  LinkOptions opt;
  opt.checksum = (h.flags & kChecksum) != 0;
  opt.acks = (h.flags & kAcks) != 0;
  opt.striped = opt.acks;
  if (opt.striped) {
    opt.delay = config_.emulation.delay;
    opt.rejoin = (h.flags & kRejoinable) != 0;
    opt.reconnect_for = config_.reconnect_for;
    opt.tuning = config_.tuning;
    opt.tls = (h.flags & kTls) ? plugin_tls() : nullptr;
    for (Wire& w : g.streams) tune_stream(w.fd(), config_.tuning);
  }
  log::info("accepted %s connection from %s: %d stream(s)%s%s%s%s", opt.striped ? "striped" : "direct TCP",
            peer.c_str(), h.stream_count, opt.checksum ? ", CRC32C frames" : "", opt.acks ? ", acks" : "",
            opt.rejoin ? ", broken streams redialled" : "", opt.tls ? ", TLS" : "");
  return TransferCommPtr(new RecvComm(std::move(g.streams), opt, peer, h));
}

}  // namespace strata::nccl_net
