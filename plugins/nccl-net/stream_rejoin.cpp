#include "stream_rejoin.hpp"

#include "errors.hpp"
#include "log.hpp"

namespace strata::nccl_net {

namespace {
constexpr std::size_t kMaxIncoming = 16;
}  // namespace

RejoinListener::RejoinListener(int stream, std::uint64_t conn_id, int streams, int socket_buffer)
    : conn_id_(conn_id), streams_(streams) {
  socklen_t len = 0;
  const sockaddr_storage here = local_address(stream, &len);
  fd_ = listen_on(here, len, &port_);
  // Accepted sockets inherit the listener's buffers, and with them the window scale
  // their handshake negotiates.
  if (socket_buffer > 0) set_buffers(fd_.get(), socket_buffer);
}

int RejoinListener::poll(Fd* out) {
  for (;;) {
    Fd fd = accept_one(fd_.get());
    if (!fd) break;
    incoming_.push_back(Incoming{std::move(fd)});
    // Only a stranger holds a connection here without sending its hello; keep few.
    if (incoming_.size() > kMaxIncoming) incoming_.erase(incoming_.begin());
  }
  for (std::size_t i = 0; i < incoming_.size(); ++i) {
    Incoming& in = incoming_[i];
    const auto state = in.auth.step(in.fd.get());
    if (state == AcceptAuth::State::pending) continue;
    const Hello& h = in.auth.hello();
    const bool ours = state == AcceptAuth::State::proven && h.magic == Hello::kMagic && h.version == Hello::kVersion &&
                      (h.flags & kRejoin) && h.conn_id == conn_id_ && h.stream_index < streams_;
    const int index = ours ? h.stream_index : -1;
    if (ours) *out = std::move(in.fd);
    else log::warn("dropped a connection to the rejoin port that was not a rejoin of this connection");
    incoming_.erase(incoming_.begin() + static_cast<std::ptrdiff_t>(i));
    if (ours) return index;
    --i;
  }
  return -1;
}

Redial::Redial(const sockaddr_storage& addr, socklen_t len, const Hello& first, int stream, int socket_buffer)
    : fd_(start_connect(addr, len, socket_buffer)), hello_(first) {
  hello_.flags = static_cast<std::uint16_t>(kRejoin);
  hello_.stream_index = static_cast<std::uint16_t>(stream);
  hello_.reserved = 0;
}

Redial::State Redial::step() {
  if (!connected_) {
    const Dial d = dial_state(fd_.get());
    if (d == Dial::refused) return State::refused;
    if (d == Dial::pending) return State::pending;
    connected_ = true;
  }
  if (!auth_) auth_ = std::make_unique<DialAuth>(plugin_secret(), hello_);
  return auth_->step(fd_.get(), "the sender's rejoin port") ? State::done : State::pending;
}

}  // namespace strata::nccl_net
