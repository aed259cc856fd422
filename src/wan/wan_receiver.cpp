// The WAN link's receiving side: frames parsed out of a per-stream buffer (a large
// stripe of a message whose receive is posted is read straight into the caller's
// buffer), checked by sequence number and CRC, held for the emulated delay, then
// delivered; messages are matched to receives in message-id order per peer.
#include <cstring>

#include "base/keepalive.hpp"
#include "wan/wan_transport.hpp"

namespace strata::wan {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
constexpr std::size_t kReadBuffer = 256 << 10;
constexpr std::size_t kDirectRead = 64 << 10;  // payload left beyond this skips the buffer
}  // namespace

void WanTransport::accept() {
  net_.accept([this](tcp::socket s) {
    boost::system::error_code ec;
    s.set_option(tcp::no_delay(true), ec);
    net::keep_alive(s.native_handle(), opt_.keepalive, opt_.stall);
    tune(s.native_handle());  // its acknowledgements cross the same path
    read_hello(std::make_shared<Socket>(std::move(s), tls_ ? &tls_->get() : nullptr));
  });
}

void WanTransport::read_hello(SocketPtr sock) {
  gate_.admit(sock, [this, sock](const bootstrap::auth::Bytes& payload) {
    std::uint32_t h[2];
    std::memcpy(h, payload.data(), sizeof h);
    boost::system::error_code ignored;
    if (aborted()) return sock->close(ignored);
    if (h[0] >= static_cast<std::uint32_t>(size()) || h[1] >= static_cast<std::uint32_t>(opt_.all_streams())) {
      gate_.refuse(bootstrap::auth::Gate::peer_of(*sock), "it claims rank " + std::to_string(h[0]) + ", stream " +
                   std::to_string(h[1]) + " (this link has " + std::to_string(size()) + " ranks, " +
                   std::to_string(opt_.all_streams()) + " streams per peer)");
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
    st.reader.reset();
    st.stalled = false;
    st.msg.reset();
    st.ack_writing = false;
    st.reader.cursor().rejoined();  // the sender resends only what is missing
    pump(peer, s);
    send_ack(peer, s);
  });
}

// The stream's reader fed from its read buffer: headers and payloads are copied out of
// it (a payload into its message's current destination, looked up on every read because
// a receive posted meanwhile may move it out of staging; a dropped one stays where it is).
struct WanTransport::FrameIo {
  WanTransport& t;
  int peer, s;
  InStream& st;

  std::size_t read(unsigned char* into, std::size_t max, bool*) {
    const std::size_t n = std::min(max, st.rend - st.rpos);
    std::memcpy(into, st.rbuf.data() + st.rpos, n);
    st.rpos += n;
    return n;
  }
  std::span<const unsigned char> read_payload(std::size_t max, bool*) {
    const std::size_t n = std::min(max, st.rend - st.rpos);
    const unsigned char* p = st.rbuf.data() + st.rpos;
    st.rpos += n;
    if (n && !st.reader.dropping() && st.msg->dest)
      std::memcpy(st.msg->dest + st.reader.header().h.offset + st.reader.payload_done(), p, n);
    return {p, n};
  }
  link::Verdict on_header(const link::InCursor::Header& c) { return t.begin_frame(peer, s, c); }
  bool on_frame(const link::FrameHeader& h, bool dropped) {
    if (!dropped) t.end_frame(peer, s, h);
    return true;
  }
  void on_broken(const std::string&) { t.break_inbound(peer, s); }  // the sender resends
};

void WanTransport::pump(int peer, int s) {
  auto& st = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
  if (st.stalled) return;  // resumed by a receive posted or staging freed
  const SocketPtr sock = st.sock;
  FrameIo io{*this, peer, s, st};
  const link::Pumped p = link::read_frames(st.reader, io);
  if (p.why == link::Pumped::Why::held) st.stalled = true;
  if (p.why != link::Pumped::Why::need_bytes) return;
  // Only a matched receive's own buffer is read into directly: staging may be freed
  // (moved to a receive posted meanwhile) while a read would still be writing to it.
  InMsg* m = st.msg.get();
  const link::FrameReader& r = st.reader;
  if (r.state() == link::FrameReader::State::payload && !r.dropping() && m && m->req && m->dest &&
      r.payload_left() >= kDirectRead) {
    char* direct = m->dest + r.header().h.offset + r.payload_done();
    const std::size_t want = r.payload_left();
    st.rpos = st.rend = 0;
    asio::async_read(*sock, asio::buffer(direct, want), net::transfer_whole,
                     [this, peer, s, sock, direct, want](boost::system::error_code ec, std::size_t) {
                       auto& t = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
                       if (sock != t.sock) return;
                       if (ec) return break_inbound(peer, s);
                       t.reader.payload_read(direct, want);
                       pump(peer, s);
                     });
    return;
  }
  // Need more bytes: the buffer is empty (the reader took all of it).
  st.rpos = st.rend = 0;
  sock->async_read_some(asio::buffer(st.rbuf.data(), st.rbuf.size()),
                        [this, peer, s, sock](boost::system::error_code ec, std::size_t got) {
                          auto& t = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
                          if (sock != t.sock) return;
                          if (ec) return break_inbound(peer, s);
                          t.rend += got;
                          pump(peer, s);
                        });
}

link::Verdict WanTransport::begin_frame(int peer, int s, const link::InCursor::Header& c) {
  auto& in = in_[static_cast<std::size_t>(peer)];
  auto& st = in.streams[static_cast<std::size_t>(s)];
  using Kind = link::InCursor::Header::Kind;
  const link::FrameHeader& h = c.h;
  if (c.kind == Kind::goodbye) {
    // Nothing follows it on this stream; it takes effect behind the stripes still held.
    Arrival a;
    a.goodbye = true;
    a.sent_msgs = h.msg_id;
    if (held(h.sent_ns, st.delayed.empty(), &a.due)) st.delayed.push_back(std::move(a));
    else on_goodbye(peer, h.msg_id);
    break_inbound(peer, s);
    return link::Verdict::stop;
  }
  if (c.kind == Kind::broken) {
    break_inbound(peer, s);
    return link::Verdict::stop;
  }
  st.msg.reset();
  if (c.kind == Kind::resent) return link::Verdict::drop;  // it arrived before the stream broke
  auto it = in.msgs.find(h.msg_id);
  if (it == in.msgs.end() && h.msg_id >= in.next_match) {
    // A new message needs staging unless a receive is ready for it; a length from the
    // wire is allocated only within the budget, else the stream waits (see resume_stalled).
    const bool staged = h.msg_id != in.next_match || !in.posted.contains(h.tag);
    if (staged && h.total > opt_.unexpected_bytes - std::min(opt_.unexpected_bytes, staged_))
      return link::Verdict::hold;
  }
  if (it != in.msgs.end()) {
    if (it->second->tag != h.tag || it->second->total != h.total) {
      break_inbound(peer, s);
      return link::Verdict::stop;
    }
    st.msg = it->second;
    return link::Verdict::take;
  }
  if (h.msg_id < in.next_match) {  // claims a message that already finished
    break_inbound(peer, s);
    return link::Verdict::stop;
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
  return link::Verdict::take;
}

void WanTransport::end_frame(int peer, int s, const link::FrameHeader& h) {
  auto& st = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
  Arrival a;
  a.seq = h.seq;
  a.msg = std::move(st.msg);
  a.len = h.length;
  if (held(h.sent_ns, st.delayed.empty(), &a.due)) st.delayed.push_back(std::move(a));
  else deliver(peer, s, a);
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
  st.reader.cursor().delivered(a.seq);
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
  bool advanced = false;
  for (;;) {
    auto it = in.msgs.find(in.next_match);
    if (it == in.msgs.end()) break;
    const InMsgPtr m = it->second;
    ++in.next_match;
    advanced = true;
    match(peer, m);
  }
  // A stream may hold the header of the message that is next now: held while it was not
  // (it would have needed staging beyond the budget), it may now go straight to its posted
  // receive. Matching frees no staging when the messages it matched had none, so nothing
  // else would look at that stream again.
  if (advanced) resume_stalled();
}

void WanTransport::match(int peer, const InMsgPtr& m) {
  auto& in = in_[static_cast<std::size_t>(peer)];
  m->matched = true;
  if (ReqPtr r = in.posted.take(m->tag)) {
    if (m->total > r->size) {
      r->fail(transport::truncation(peer, m->total, r->size));
      m->dest = nullptr;
    } else {
      if (m->staging.data && m->total) std::memcpy(r->buf, m->staging.data.get(), m->total);
      m->dest = static_cast<char*>(r->buf);
      m->req = r;
    }
    unstage(*m);
  } else {
    if (!m->staging.data) stage(*m);
    in.unexpected.push(m->tag, m);
  }
  if (m->complete) {
    if (m->req) m->req->complete(m->total);
    m->req.reset();
    in.msgs.erase(m->id);
  }
}

void WanTransport::stage(InMsg& m) {
  m.staging = buffers_.take(m.total);
  m.dest = m.staging.data.get();
  m.budgeted = true;
  staged_ += m.total;
}

void WanTransport::unstage(InMsg& m) {
  buffers_.give(std::move(m.staging));
  if (!m.budgeted) return;
  m.budgeted = false;
  staged_ -= m.total;
  resume_stalled();
}

void WanTransport::resume_stalled() {
  for (int p = 0; p < size(); ++p)
    for (int s = 0; s < opt_.all_streams(); ++s) {
      auto& st = in_[static_cast<std::size_t>(p)].streams[static_cast<std::size_t>(s)];
      if (!st.stalled || !st.sock) continue;
      st.stalled = false;
      pump(p, s);
    }
}

void WanTransport::send_ack(int peer, int s) {
  auto& st = in_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
  if (!st.sock || st.ack_writing) return;
  const auto ack = st.reader.cursor().take_ack(now_ns());
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
  st.reader.reset();
  st.stalled = false;
  st.msg.reset();
  st.ack_writing = false;
  settle_inbound(peer);  // a departing peer's last stream may just have closed
}

}  // namespace strata::wan
