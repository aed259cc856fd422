// The TCP transport's receive path: frames parsed out of a per-peer buffer, so a burst
// of small messages costs one read, while a large payload whose receive is already
// posted is read directly into the caller's buffer (no extra copy).
#include <cstring>

#include "transport/tcp/tcp_request.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace strata::transport::tcp {

namespace asio = boost::asio;

namespace {
constexpr std::size_t kReadBuffer = 256 << 10;
// Payload still missing beyond this goes straight to its destination: a read costs about
// what copying this much does.
constexpr std::size_t kDirectRead = 16 << 10;
constexpr std::uint64_t kMaxMessage = 1ull << 40;
}  // namespace

bool TcpTransport::begin_frame(int peer) {
  auto& in = in_[peer];
  const Tag tag = in.header.tag;
  const std::size_t n = in.header.bytes;
  in.remaining = n;
  in.target = nullptr;
  in.large = n >= kDirectRead;
  if ((in.req = in.posted.take(tag))) {
    if (n > in.req->size) {
      // Fail this receive, and keep the stream in step by dropping the payload.
      in.req->fail(truncation(peer, n, in.req->size));
      in.req.reset();
    } else {
      in.target = static_cast<char*>(in.req->buf);
    }
    return true;
  }
  if (n > unexpected_budget_ - std::min(unexpected_budget_, unexpected_held_)) return false;
  in.unexpected_msg = std::make_shared<Unexpected>();
  in.unexpected_msg->buffer = pool_.take(n);
  in.unexpected_msg->size = n;
  in.unexpected_msg->budgeted = true;
  unexpected_held_ += n;
  in.target = in.unexpected_msg->buffer.data.get();
  in.unexpected.push(tag, in.unexpected_msg);
  return true;
}

void TcpTransport::release(Unexpected& u) {
  if (!u.budgeted) return;
  u.budgeted = false;
  unexpected_held_ -= u.size;
  resume_stalled();
}

void TcpTransport::resume_stalled() {
  for (std::size_t p = 0; p < in_.size(); ++p)
    if (in_[p].stalled && in_[p].sock) {
      in_[p].stalled = false;
      pump(static_cast<int>(p));
    }
}

void TcpTransport::end_frame(int peer) {
  auto& in = in_[peer];
  if (in.req) in.req->complete(in.header.bytes);
  if (auto u = std::move(in.unexpected_msg)) {
    u->complete = true;
    if (u->waiting) {
      deliver(peer, *u, *u->waiting, pool_);
      release(*u);
    }
  }
  in.req.reset();
  in.in_payload = false;
}

void TcpTransport::pump(int peer) {
  auto& in = in_[peer];
  if (in.stalled) return;  // resumed by a receive posted for it, or by budget freed
  if (in.rbuf.empty()) in.rbuf.resize(kReadBuffer);
  for (;;) {
    const std::size_t avail = in.rend - in.rpos;
    if (!in.in_payload) {
      if (avail < sizeof(Header)) break;
      std::memcpy(&in.header, in.rbuf.data() + in.rpos, sizeof(Header));
      if (in.header.bytes > kMaxMessage)
        return fail_inbound(peer, "corrupt frame header (a " + std::to_string(in.header.bytes) + "-byte message)");
      if (!begin_frame(peer)) {
        in.stalled = true;  // the header stays buffered and is parsed again on resume
        return;
      }
      in.rpos += sizeof(Header);
      in.in_payload = true;
      continue;
    }
    const std::size_t n = std::min(in.remaining, avail);
    if (in.target && n) {
      std::memcpy(in.target, in.rbuf.data() + in.rpos, n);
      in.target += n;
    }
    in.rpos += n;
    in.remaining -= n;
    if (in.remaining == 0) {
      end_frame(peer);
      continue;
    }
    if (in.target && in.remaining >= kDirectRead) {
      in.rpos = in.rend = 0;
      asio::async_read(*in.sock, asio::buffer(in.target, in.remaining), net::transfer_whole,
                       [this, peer](boost::system::error_code ec, std::size_t) {
                         if (ec) return fail_inbound(peer, "connection lost: " + ec.message());
                         in_[peer].remaining = 0;
                         end_frame(peer);
                         pump(peer);
                       });
      return;
    }
    break;
  }
  // Need more bytes: keep what is unparsed at the front and read behind it.
  if (in.rpos == in.rend) {
    in.rpos = in.rend = 0;
  } else if (in.rpos > 0) {
    std::memmove(in.rbuf.data(), in.rbuf.data() + in.rpos, in.rend - in.rpos);
    in.rend -= in.rpos;
    in.rpos = 0;
  }
  // After a large frame the next is likely large too: read little more than its header,
  // so that its payload goes straight to its destination instead of through rbuf (which
  // cost a copy of every byte when the whole message was already in the socket).
  const std::size_t room = in.rbuf.size() - in.rend;
  in.sock->async_read_some(asio::buffer(in.rbuf.data() + in.rend, in.large ? std::min(room, kDirectRead) : room),
                           [this, peer](boost::system::error_code ec, std::size_t got) {
                             if (ec) return fail_inbound(peer, "connection lost: " + ec.message());
                             in_[peer].rend += got;
                             pump(peer);
                           });
}

}  // namespace strata::transport::tcp
