// The WAN link's receiving side: frames parsed out of a per-stream buffer (a large
// stripe of a message whose receive is posted is read straight into the caller's
// buffer), checked by sequence number and CRC, held for the emulated delay, then
// delivered; messages are matched to receives in message-id order per peer.
#include <cstring>

#include "base/keepalive.hpp"
#include "wan/crc32c.hpp"
#include "wan/wan_transport.hpp"

namespace strata::wan {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
constexpr std::size_t kReadBuffer = 256 << 10;
constexpr std::size_t kDirectRead = 64 << 10;  // payload left beyond this skips the buffer
constexpr std::uint32_t kMaxStripe = 64u << 20;
}  // namespace

void WanTransport::accept() {
  net_.accept([this](tcp::socket s) {
    boost::system::error_code ec;
    s.set_option(tcp::no_delay(true), ec);
    net::keep_alive(s.native_handle(), opt_.keepalive, opt_.stall);
    read_hello(std::make_shared<Socket>(std::move(s), tls_ ? &tls_->get() : nullptr));
  });
}

void WanTransport::read_hello(SocketPtr sock) {
  gate_.admit(sock, [this, sock](const bootstrap::auth::Bytes& payload) {
    std::uint32_t h[2];
    std::memcpy(h, payload.data(), sizeof h);
    boost::system::error_code ignored;
    if (aborted()) return sock->close(ignored);
    if (h[0] >= static_cast<std::uint32_t>(size()) || h[1] >= static_cast<std::uint32_t>(opt_.streams)) {
      gate_.refuse(bootstrap::auth::Gate::peer_of(*sock), "it claims rank " + std::to_string(h[0]) + ", stream " +
                   std::to_string(h[1]) + " (this link has " + std::to_string(size()) + " ranks, " +
                   std::to_string(opt_.streams) + " streams per peer)");
      return sock->close(ignored);
    }
    const int peer = static_cast<int>(h[0]), s = static_cast<int>(h[1]);
    auto& st = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
    // A new connection for a stream replaces the old one: the sender saw it break (and
    // proved itself again: only a member of the job can cut a stream this way).
    if (st.sock) st.sock->close(ignored);
    st.sock = sock;
    st.rbuf.resize(kReadBuffer);
    st.rpos = st.rend = 0;
    st.in_payload = false;
    st.stalled = false;
    st.msg.reset();
    st.ack_writing = false;
    st.cursor.rejoined();  // the sender resends only what is missing
    pump(peer, s);
    send_ack(peer, s);
  });
}

void WanTransport::pump(int peer, int s) {
  auto& st = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
  if (st.stalled) return;  // resumed by a receive posted or staging freed
  const SocketPtr sock = st.sock;
  for (;;) {
    const std::size_t avail = st.rend - st.rpos;
    if (!st.in_payload) {
      if (avail < kHeaderBytes) break;
      const unsigned char* header = st.rbuf.data() + st.rpos;
      st.rpos += kHeaderBytes;
      if (!begin_frame(peer, s, header)) return;
      continue;
    }
    const std::size_t n = std::min(st.remaining, avail);
    consume(st, st.rbuf.data() + st.rpos, n);
    st.rpos += n;
    if (st.remaining == 0) {
      if (!end_frame(peer, s)) return;
      continue;
    }
    // Only a matched receive's own buffer is read into directly: staging may be freed
    // (moved to a receive posted meanwhile) while a read would still be writing to it.
    InMsg* m = st.msg.get();
    if (!st.discard && m && m->req && m->dest && st.remaining >= kDirectRead) {
      char* direct = m->dest + st.h.offset + st.done;
      const std::size_t want = st.remaining;
      st.rpos = st.rend = 0;
      asio::async_read(*sock, asio::buffer(direct, want), net::transfer_whole,
                       [this, peer, s, sock, direct, want](boost::system::error_code ec, std::size_t) {
                         auto& t = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
                         if (sock != t.sock) return;
                         if (ec) return break_inbound(peer, s);
                         t.crc = crc32c_extend(t.crc, direct, want);
                         t.done += want;
                         t.remaining = 0;
                         if (end_frame(peer, s)) pump(peer, s);
                       });
      return;
    }
    break;
  }
  // Need more bytes: keep what is unparsed at the front and read behind it.
  if (st.rpos == st.rend) {
    st.rpos = st.rend = 0;
  } else if (st.rpos > 0) {
    std::memmove(st.rbuf.data(), st.rbuf.data() + st.rpos, st.rend - st.rpos);
    st.rend -= st.rpos;
    st.rpos = 0;
  }
  sock->async_read_some(asio::buffer(st.rbuf.data() + st.rend, st.rbuf.size() - st.rend),
                        [this, peer, s, sock](boost::system::error_code ec, std::size_t got) {
                          auto& t = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
                          if (sock != t.sock) return;
                          if (ec) return break_inbound(peer, s);
                          t.rend += got;
                          pump(peer, s);
                        });
}

bool WanTransport::begin_frame(int peer, int s, const unsigned char* header) {
  auto& in = in_[static_cast<std::size_t>(peer)];
  auto& st = in.streams[static_cast<std::size_t>(s)];
  const InCursor::Header c = st.cursor.check(header, kMaxStripe);
  using Kind = InCursor::Header::Kind;
  const FrameHeader& h = c.h;
  if (c.kind == Kind::goodbye) {
    // Nothing follows it on this stream; it takes effect behind the stripes still held.
    Arrival a;
    a.goodbye = true;
    a.sent_msgs = h.msg_id;
    if (held(h.sent_ns, st.delayed.empty(), &a.due)) st.delayed.push_back(std::move(a));
    else on_goodbye(peer, h.msg_id);
    break_inbound(peer, s);
    return false;
  }
  if (c.kind == Kind::broken) {
    break_inbound(peer, s);
    return false;
  }
  st.h = h;
  st.done = 0;
  st.remaining = h.length;
  st.crc = 0;
  st.in_payload = true;
  st.msg.reset();
  st.discard = c.kind == Kind::resent;  // it arrived before the stream broke
  if (st.discard) return true;
  auto it = in.msgs.find(h.msg_id);
  if (it == in.msgs.end() && h.msg_id >= in.next_match) {
    // A new message needs staging unless a receive is ready for it; a length from the
    // wire is allocated only within the budget, else the stream waits (see resume_stalled).
    const bool staged = h.msg_id != in.next_match || !in.posted.contains(h.tag);
    if (staged && h.total > opt_.unexpected_bytes - std::min(opt_.unexpected_bytes, staged_)) {
      st.in_payload = false;
      st.stalled = true;
      st.rpos -= kHeaderBytes;  // parsed again on resume
      return false;
    }
  }
  if (it != in.msgs.end()) {
    if (it->second->tag != h.tag || it->second->total != h.total) {
      break_inbound(peer, s);
      return false;
    }
    st.msg = it->second;
    return true;
  }
  if (h.msg_id < in.next_match) {  // claims a message that already finished
    break_inbound(peer, s);
    return false;
  }
  // The header CRC vouches for it: the message exists even if this payload turns out
  // damaged (then the stripe comes again), so it can be matched before the bytes arrive.
  auto m = std::make_shared<InMsg>();
  m->id = h.msg_id;
  m->tag = h.tag;
  m->total = h.total;
  if (m->id != in.next_match) stage(*m);  // earlier messages must match first
  in.msgs[m->id] = m;
  st.msg = m;
  try_match(peer);
  if (in.departing) settle_inbound(peer);  // that may have been the last message it sent
  return true;
}

void WanTransport::consume(InStream& st, const unsigned char* p, std::size_t n) {
  if (n == 0) return;
  st.crc = crc32c_extend(st.crc, p, n);
  if (!st.discard) {
    // Through msg->dest on every call: a receive posted meanwhile may have moved it.
    if (st.msg->dest) std::memcpy(st.msg->dest + st.h.offset + st.done, p, n);
  }
  st.done += n;
  st.remaining -= n;
}

bool WanTransport::end_frame(int peer, int s) {
  auto& st = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
  st.in_payload = false;
  if (!st.cursor.arrived(st.h, st.crc, true)) {  // a broken stream: the sender resends
    break_inbound(peer, s);
    return false;
  }
  if (st.discard) return true;
  Arrival a;
  a.seq = st.h.seq;
  a.msg = std::move(st.msg);
  a.len = st.h.length;
  if (held(st.h.sent_ns, st.delayed.empty(), &a.due)) st.delayed.push_back(std::move(a));
  else deliver(peer, s, a);
  return true;
}

bool WanTransport::held(std::int64_t sent_ns, bool queue_empty, Clock::time_point* due) {
  const auto delay = opt_.emulation.delay;
  if (delay.count() <= 0) return false;
  *due = Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(sent_ns))) + delay;
  if (*due <= Clock::now() && queue_empty) return false;
  next_due_ = std::min(next_due_, *due);
  return true;
}

void WanTransport::deliver(int peer, int s, const Arrival& a) {
  if (a.goodbye) return on_goodbye(peer, a.sent_msgs);
  auto& in = in_[static_cast<std::size_t>(peer)];
  auto& st = in.streams[static_cast<std::size_t>(s)];
  st.cursor.delivered(a.seq);
  InMsg& m = *a.msg;
  m.received += a.len;
  // Per stripe as it is accepted (resent duplicates never get here), so the counter
  // moves while a large message arrives and totals each peer's payload_sent to us.
  count(payload_received_, a.len);
  if (m.received >= m.total && !m.complete) {
    m.complete = true;
    if (m.matched) {
      if (m.req) m.req->complete(m.total);
      m.req.reset();
      in.msgs.erase(m.id);
    }
  }
  send_ack(peer, s);
}

void WanTransport::try_match(int peer) {
  auto& in = in_[static_cast<std::size_t>(peer)];
  for (;;) {
    auto it = in.msgs.find(in.next_match);
    if (it == in.msgs.end()) return;
    const InMsgPtr m = it->second;
    ++in.next_match;
    match(peer, m);
  }
}

void WanTransport::match(int peer, const InMsgPtr& m) {
  auto& in = in_[static_cast<std::size_t>(peer)];
  m->matched = true;
  if (ReqPtr r = in.posted.take(m->tag)) {
    if (m->total > r->size) {
      r->fail(transport::truncation(peer, m->total, r->size));
      m->dest = nullptr;
    } else {
      if (m->staging && m->total) std::memcpy(r->buf, m->staging.get(), m->total);
      m->dest = static_cast<char*>(r->buf);
      m->req = r;
    }
    unstage(*m);
  } else {
    if (!m->staging) stage(*m);
    in.unexpected.push(m->tag, m);
  }
  if (m->complete) {
    if (m->req) m->req->complete(m->total);
    m->req.reset();
    in.msgs.erase(m->id);
  }
}

void WanTransport::stage(InMsg& m) {
  m.staging.reset(new char[m.total ? m.total : 1]);
  m.dest = m.staging.get();
  m.budgeted = true;
  staged_ += m.total;
}

void WanTransport::unstage(InMsg& m) {
  m.staging.reset();
  if (!m.budgeted) return;
  m.budgeted = false;
  staged_ -= m.total;
  resume_stalled();
}

void WanTransport::resume_stalled() {
  for (int p = 0; p < size(); ++p)
    for (int s = 0; s < opt_.streams; ++s) {
      auto& st = in_[static_cast<std::size_t>(p)].streams[static_cast<std::size_t>(s)];
      if (!st.stalled || !st.sock) continue;
      st.stalled = false;
      pump(p, s);
    }
}

void WanTransport::send_ack(int peer, int s) {
  auto& st = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
  if (!st.sock || st.ack_writing) return;
  const auto ack = st.cursor.take_ack(now_ns());
  if (!ack) return;
  st.ack_out = *ack;
  st.ack_writing = true;
  const SocketPtr sock = st.sock;
  asio::async_write(*sock, asio::buffer(st.ack_out), [this, peer, s, sock](boost::system::error_code ec, std::size_t n) {
    count(wire_sent_, n);
    auto& t = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
    if (sock != t.sock) return;
    t.ack_writing = false;
    if (ec) return break_inbound(peer, s);
    send_ack(peer, s);
  });
}

void WanTransport::break_inbound(int peer, int s) {
  // Only the sender reconnects; what was delivered and what is held stays.
  auto& st = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
  boost::system::error_code ec;
  if (st.sock) st.sock->close(ec);
  st.sock.reset();
  st.in_payload = false;
  st.stalled = false;
  st.msg.reset();
  st.ack_writing = false;
  settle_inbound(peer);  // a departing peer's last stream may just have closed
}

}  // namespace strata::wan
