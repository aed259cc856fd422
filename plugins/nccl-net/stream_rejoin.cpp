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
    bool eof = false, drop = false;
    try {
      in.got += recv_some(in.fd.get(), reinterpret_cast<char*>(&in.hello) + in.got, sizeof(Hello) - in.got, &eof);
    } catch (const NetError&) {
      drop = true;
    }
    if (!drop && !eof && in.got < sizeof(Hello)) continue;
    const Hello& h = in.hello;
    const bool ours = !drop && !eof && h.magic == Hello::kMagic && h.version == Hello::kVersion &&
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
  const iovec iov{reinterpret_cast<char*>(&hello_) + written_, sizeof(Hello) - written_};
  written_ += send_some(fd_.get(), &iov, 1);
  return written_ == sizeof(Hello) ? State::done : State::pending;
}

}  // namespace strata::nccl_net
