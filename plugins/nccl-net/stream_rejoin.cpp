#include "stream_rejoin.hpp"

#include "errors.hpp"
#include "log.hpp"

namespace strata::nccl_net {

namespace {
constexpr std::size_t kMaxIncoming = 16;
}  // namespace

RejoinListener::RejoinListener(int stream, std::uint64_t conn_id, int streams, int socket_buffer, ssl_ctx_st* tls,
                               const net::PortRange& ports)
    : tls_(tls), conn_id_(conn_id), streams_(streams) {
  socklen_t len = 0;
  const sockaddr_storage here = local_address(stream, &len);
  // Accepted sockets inherit the listener's buffers, and with them the window scale
  // their handshake negotiates.
  fd_ = listen_on(here, len, ports, "NCCL net plugin (rejoin port)", &port_, socket_buffer);
}

int RejoinListener::poll(Wire* out) {
  for (;;) {
    Fd fd = accept_one(fd_.get());
    if (!fd) break;
    incoming_.push_back(Incoming{Wire(std::move(fd))});
    // Only a stranger holds a connection here without sending its hello; keep few.
    if (incoming_.size() > kMaxIncoming) incoming_.erase(incoming_.begin());
  }
  for (std::size_t i = 0; i < incoming_.size();) {
    const int index = advance(incoming_[i]);
    if (index == -1) {
      ++i;
      continue;
    }
    if (index >= 0) *out = std::move(incoming_[i].wire);
    incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
    if (index >= 0) return index;
  }
  return -1;
}

int RejoinListener::advance(Incoming& in) {
  if (in.index < 0) {
    const auto state = in.auth.step(in.wire.fd());
    if (state == AcceptAuth::State::pending) return -1;
    const Hello& h = in.auth.hello();
    const bool ours = state == AcceptAuth::State::proven && h.magic == Hello::kMagic && h.version == Hello::kVersion &&
                      (h.flags & kRejoin) && h.conn_id == conn_id_ && h.stream_index < streams_;
    if (!ours) {
      log::warn("dropped a connection to the rejoin port that was not a rejoin of this connection");
      return -2;
    }
    in.index = h.stream_index;
    if (tls_) in.wire.start_tls(tls_, false);
  }
  try {
    if (in.wire.tls() && !in.wire.handshake("the receiver redialling stream " + std::to_string(in.index)))
      return -1;
  } catch (const NetError& e) {
    log::warn("dropped a redial of stream %d: %s", in.index, e.what());
    return -2;
  }
  return in.index;
}

Redial::Redial(const sockaddr_storage& addr, socklen_t len, const Hello& first, int stream,
               const net::PathTuning& tuning, ssl_ctx_st* tls)
    : wire_(start_connect(addr, len, &tuning)), hello_(first), tls_(tls) {
  hello_.flags = static_cast<std::uint16_t>(kRejoin);
  hello_.stream_index = static_cast<std::uint16_t>(stream);
  hello_.reserved = 0;
}

Redial::State Redial::step() {
  if (!connected_) {
    const Dial d = dial_state(wire_.fd());
    if (d == Dial::refused) return State::refused;
    if (d == Dial::pending) return State::pending;
    connected_ = true;
  }
  if (!proven_) {
    if (!auth_) auth_ = std::make_unique<DialAuth>(plugin_secret(), hello_);
    if (!auth_->step(wire_.fd(), "the sender's rejoin port")) return State::pending;
    proven_ = true;
    if (tls_) wire_.start_tls(tls_, true);
  }
  return !wire_.tls() || wire_.handshake("the sender's rejoin port") ? State::done : State::pending;
}

}  // namespace strata::nccl_net
