// The WAN link's sending side: lazy connections, adaptive striping onto streams,
// cumulative acks, and reconnect-and-resend when a stream breaks.
#include <algorithm>
#include <cstring>

#include "base/keepalive.hpp"
#include "bootstrap/tcp_store.hpp"
#include "base/log.hpp"
#include "base/sys_errors.hpp"
#include "link/crc32c.hpp"
#include "link/striping.hpp"
#include "wan/wan_transport.hpp"

namespace strata::wan {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
constexpr std::size_t kMaxBatch = 16;               // frames per gathered write
}  // namespace

void WanTransport::retire(const ReqPtr& req) {
  if (--req->stripes_left > 0) return;
  req->complete(req->size);
  if (!req->early) return;
  auto& o = out_[static_cast<std::size_t>(req->peer())];
  --o.early_sends;
  early_total_.fetch_sub(1, std::memory_order_relaxed);
  if (req->owned.data) {
    o.owned_bytes -= req->size;
    buffers_.give(std::move(req->owned));
  }
}

void WanTransport::service_outbound(int peer, Clock::time_point now) {
  auto& o = out_[static_cast<std::size_t>(peer)];
  for (std::size_t s = 0; s < o.streams.size(); ++s) {
    auto& st = o.streams[s];
    while (!st.delayed_acks.empty() && st.delayed_acks.front().due <= now) {
      const HeldAck a = st.delayed_acks.front();
      st.delayed_acks.pop_front();
      if (a.goodbye) farewell_outbound(peer, static_cast<int>(s), a.sent_msgs);
      else apply_ack(peer, static_cast<int>(s), a.seq);
    }
    if (!st.delayed_acks.empty()) next_due_ = std::min(next_due_, st.delayed_acks.front().due);
  }
  if (o.departing) settle_departure(peer);  // the last held acknowledgement may have come
  if (!o.failed.empty()) return;
  for (std::size_t s = 0; s < o.streams.size(); ++s) {
    auto& st = o.streams[s];
    // Both lanes' streams are dialled at a first send of either: a lane first used later
    // would pay its connection set-up inside a call (or a probe's round trip).
    if (st.sock || o.departing || (!o.has_pending() && st.q.empty())) continue;
    if (st.down && now - st.down_since > opt_.reconnect_for)
      return fail_peer(peer, "stream " + std::to_string(s) + " could not be restored within " +
                                 std::to_string(opt_.reconnect_for.count()) + " ms (last: " + st.last_error + ")");
    if (now >= st.retry_at) connect(peer, static_cast<int>(s));
    else next_due_ = std::min(next_due_, st.retry_at);
  }
  schedule(peer);
}

std::vector<std::uint64_t> WanTransport::frames_written(int peer) const {
  std::vector<std::uint64_t> n;
  for (const auto& st : out_.at(static_cast<std::size_t>(peer)).streams) n.push_back(st.frames_written);
  return n;
}

WanTransport::Lane WanTransport::lane(const Outbound& o, std::size_t index) const {
  const auto bulk = static_cast<std::size_t>(opt_.streams);
  if (index == kLatency) return Lane{bulk, bulk + static_cast<std::size_t>(opt_.latency_streams)};
  return Lane{0, o.bulk_width > 0 ? std::min(o.bulk_width, bulk) : bulk};
}

std::size_t WanTransport::stripe_of(const Outbound& o, std::size_t bytes) const {
  // A small message is cut over every stream of its lane: a stream whose congestion
  // control paces it (BBR, at the rate the stream has seen so far) sends a few packets at
  // once and the rest a pacing interval apart, so a 16 KiB message on one stream of a path
  // that had carried little waited tens of ms. Not below 4 KiB (three segments, what a
  // paced stream sends at once); larger messages keep whole stripes, which bound frames
  // per byte.
  constexpr std::size_t kLeast = 4096, kSmall = 256u << 10;
  if (bytes > kSmall) return opt_.stripe_bytes;
  const Lane l = lane(o, lane_of(bytes));
  const std::size_t streams = l.end - l.begin;
  return std::clamp((bytes + streams - 1) / streams, kLeast, std::max(kLeast, opt_.stripe_bytes));
}

bool WanTransport::worth_owning(const Outbound& o, std::size_t bytes) const {
  if (o.owned_bytes + bytes > opt_.send_buffer) return false;
  // Small sends are copied whatever the path; larger ones where the path's round trip
  // costs more than the copy and what it does to the caches and the other ranks on the
  // cores, priced at 8 ns a byte: measured on 2 loaded cores, copying 512 KiB sends over
  // loopback lost 7% of a 1 MiB allreduce to the round trips it saved. The round trip is
  // the shortest seen, not a smoothed one: on a link that its own bytes keep busy the
  // latter is mostly their queue, which a copy does not shorten, and copying every send
  // there cost 10% of a 64 MiB hierarchical allreduce on the shaped namespaces (T/bound
  // 1.15 against 1.04-1.05). Across a far link that is every send up to the buffer; over
  // a near or busy one only small ones, where waiting costs little.
  constexpr std::size_t kAlwaysCopy = 64u << 10;
  constexpr std::int64_t kCopyPsPerByte = 8000;
  return bytes <= kAlwaysCopy ||
         static_cast<std::int64_t>(bytes) * kCopyPsPerByte / 1000 < o.min_rtt.count();
}

void WanTransport::drain_owned(std::chrono::milliseconds limit) {
  // A peer whose streams are all down (it died, or the path did) would only run the clock.
  // Any frame still unacknowledged counts, not only completed sends' copies: a socket
  // closed while acknowledgements wait unread in it is reset, and the reset throws away
  // what its kernel had not sent yet (a message striped over every stream then lost a
  // stripe to a rank that left right after sending).
  auto unacked = [](const Outbound& o) {
    if (o.has_pending()) return true;
    for (const auto& st : o.streams)
      if (!st.q.empty()) return true;
    return false;
  };
  auto worth_waiting = [&](const Outbound& o) {
    if ((o.early_sends == 0 && !unacked(o)) || !o.failed.empty() || o.departing) return false;
    for (const auto& st : o.streams)
      if (!st.down) return true;
    return false;
  };
  const auto until = Clock::now() + limit;
  while (Clock::now() < until && std::any_of(out_.begin(), out_.end(), worth_waiting)) {
    progress();
    wait_event(std::chrono::milliseconds(1));
  }
  for (std::size_t p = 0; p < out_.size(); ++p)
    if (out_[p].early_sends > 0 && out_[p].failed.empty())
      log::warn("WAN link closing with " + std::to_string(out_[p].early_sends) + " completed sends (" +
                std::to_string(out_[p].owned_bytes) + " bytes) to rank " +
                std::to_string(p) + " not acknowledged");
}

void WanTransport::schedule(int peer) {
  auto& o = out_[static_cast<std::size_t>(peer)];
  if (!o.failed.empty() || aborted()) return;
  const auto now = Clock::now();
  std::vector<link::StreamLoad> loads;
  // The latency lane first, so a small message overtakes the stripes of a large one still
  // waiting for a stream (the receiver matches messages in id order whatever their lane).
  for (const std::size_t index : {kLatency, kBulk}) {
    auto& pending = o.pending[index];
    const Lane streams = lane(o, index);
    loads.resize(streams.end - streams.begin);
    while (!pending.empty()) {
      PendingSend& ps = pending.front();
      const std::size_t len = std::min(ps.req->stripe, ps.req->size - ps.next_offset);
      for (std::size_t i = 0; i < loads.size(); ++i) {
        const auto& st = o.streams[streams.begin + i];
        // Ready while less than a stripe waits unwritten: small messages queue up and leave
        // in one gathered write, large stripes are handed out one at a time as streams drain.
        const std::size_t unwritten = st.q.unwritten_payload();
        const bool ready = st.connected && st.q.unwritten() < kMaxBatch &&
                           (unwritten == 0 || unwritten + len <= opt_.stripe_bytes);
        loads[i] = link::StreamLoad{ready, st.q.unacked_bytes()};
      }
      const int picked = link::pick_stream(loads, len, opt_.window);
      if (picked < 0) break;
      if (!o.bucket.take(double(len + link::kHeaderBytes), now, &o.rate_ready)) {
        next_due_ = std::min(next_due_, o.rate_ready);
        return;
      }
      const int pick = static_cast<int>(streams.begin) + picked;
      auto& st = o.streams[static_cast<std::size_t>(pick)];
      const link::FrameHeader h = link::stripe(ps.msg_id, ps.next_offset, ps.req->size, ps.req->tag, len);
      const char* payload = ps.req->source() + ps.next_offset;
      st.q.push(h, payload, link::crc32c(payload, len), ps.req);
      ps.next_offset += len;
      if (ps.next_offset >= ps.req->size) pending.pop_front();
      write(peer, pick);
    }
  }
}

void WanTransport::connect(int peer, int s) {
  auto& st = out_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
  const auto sock = std::make_shared<Socket>(net_.io(), tls_ ? &tls_->get() : nullptr);
  st.sock = sock;
  const auto [host, port] = bootstrap::split_host_port(net_.peer_address(peer),
                                                      "address of rank " + std::to_string(peer));
  boost::system::error_code ec;
  const tcp::endpoint ep(asio::ip::make_address(host, ec), port);
  if (ec) return fail_peer(peer, "bad address " + net_.peer_address(peer));
  auto& raw = sock->lowest_layer();
  raw.open(ep.protocol(), ec);
  // Before connecting, so the window scale negotiated in the handshake allows the buffers.
  if (!ec) tune(raw.native_handle(), lane_of_stream(static_cast<std::size_t>(s)) == kLatency);
  raw.async_connect(ep, [this, peer, s, sock](boost::system::error_code ec) {
    auto& t = out_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
    if (sock != t.sock) return;
    if (ec) return break_outbound(peer, s, "cannot connect to " + net_.peer_address(peer) + ": " + sys::describe(ec));
    sock->lowest_layer().set_option(tcp::no_delay(true), ec);
    net::keep_alive(sock->lowest_layer().native_handle(), opt_.keepalive, opt_.stall);
    const std::uint32_t h[2] = {static_cast<std::uint32_t>(rank_), static_cast<std::uint32_t>(s)};
    bootstrap::auth::Bytes payload(sizeof h);
    std::memcpy(payload.data(), h, sizeof h);
    gate_.dial(sock, std::move(payload), [this, peer, s, sock](const std::string& error) {
      auto& u = out_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
      if (sock != u.sock) return;
      if (!error.empty()) return break_outbound(peer, s, error);
      u.connected = true;
      if (u.q.empty()) u.down = false;
      read_ack(peer, s);
      write(peer, s);  // resends whatever is unacknowledged
      schedule(peer);
    });
  });
}

void WanTransport::write(int peer, int s) {
  auto& o = out_[static_cast<std::size_t>(peer)];
  auto& st = o.streams[static_cast<std::size_t>(s)];
  if (!st.connected || st.writing || st.q.unwritten() == 0) return;
  const auto& emu = opt_.emulation;
  if (emu.cut_after && s == 0 && !o.cut_done && st.frames_written >= emu.cut_after) {
    o.cut_done = true;
    return break_outbound(peer, s, "emulated cut");
  }
  std::size_t n = std::min(kMaxBatch, st.q.unwritten());
  if (emu.loss > 0) {
    std::uniform_real_distribution<double> u(0, 1);
    for (std::size_t i = 0; i < n; ++i)
      if (u(rng_) < emu.loss) {
        if (i == 0) return break_outbound(peer, s, "emulated loss");
        n = i;  // the lost frame leads the next batch, which rolls again
        break;
      }
  }
  std::vector<asio::const_buffer> bufs;
  bufs.reserve(2 * n);
  const std::int64_t stamp = now_ns();
  std::size_t bytes = 0;
  bool resend = false;
  for (std::size_t i = 0; i < n; ++i) {
    auto& f = st.q.unwritten_frame(i, stamp);
    resend |= f.sent;
    if (emu.corrupt > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < emu.corrupt)
      f.wire[56] ^= 1;  // sealed again for the resend
    bufs.emplace_back(f.wire.data(), link::kHeaderBytes);
    if (f.h.length) bufs.emplace_back(f.payload, f.h.length);
    bytes += f.wire_bytes();
  }
  count(resent_, st.q.wrote(bytes).resent);  // Asio writes it all or breaks the stream
  // A frame is acknowledged while this write still reads it only if it is a resend (the
  // receiver had it from the connection before); anything else is acknowledged after
  // its last byte went out.
  if (resend) st.q.pin(n);
  if (!resend && st.probe_seq == 0) {
    st.probe_seq = st.q.last_written();
    st.probe_sent = Clock::now();
  }
  st.frames_written += n;
  st.writing = true;
  const SocketPtr sock = st.sock;
  asio::async_write(*sock, bufs, net::transfer_whole, [this, peer, s, sock](boost::system::error_code ec, std::size_t n) {
    count(wire_sent_, n);  // what reached the socket, even from a write that then failed
    auto& t = out_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
    if (sock != t.sock) return;
    t.writing = false;
    t.q.release([this](const ReqPtr& r, std::size_t) { retire(r); });  // acknowledgements that came while it was being written
    if (ec) return break_outbound(peer, s, "send failed: " + ec.message());
    write(peer, s);
    schedule(peer);
  });
}

void WanTransport::read_ack(int peer, int s) {
  auto& st = out_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
  const SocketPtr sock = st.sock;
  asio::async_read(*sock, asio::buffer(st.ack_in), [this, peer, s, sock](boost::system::error_code ec, std::size_t) {
    auto& t = out_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
    if (sock != t.sock) return;
    if (ec) {
      break_outbound(peer, s, "connection lost: " + ec.message());
      if (ec == asio::error::timed_out) break_idle_outbound(peer);
      return;
    }
    const link::Reply r = link::read_reply(t.ack_in.data());
    const link::FrameHeader& h = r.h;
    if (r.kind == link::Reply::Kind::goodbye) {
      // The last frame on this stream; behind whatever acknowledgements are still held.
      HeldAck a;
      a.goodbye = true;
      a.sent_msgs = h.msg_id;
      if (held(h.sent_ns, t.delayed_acks.empty(), &a.due)) return t.delayed_acks.push_back(a);
      return farewell_outbound(peer, s, h.msg_id);
    }
    if (r.kind == link::Reply::Kind::broken) return break_outbound(peer, s, r.why);
    HeldAck a;
    a.seq = h.seq;
    if (held(h.sent_ns, t.delayed_acks.empty(), &a.due)) t.delayed_acks.push_back(a);
    else apply_ack(peer, s, h.seq);
    read_ack(peer, s);
  });
}

void WanTransport::farewell_outbound(int peer, int s, std::uint64_t sent_msgs) {
  out_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)].farewell = true;
  on_goodbye(peer, sent_msgs);
}

void WanTransport::apply_ack(int peer, int s, std::uint64_t seq) {
  auto& o = out_[static_cast<std::size_t>(peer)];
  auto& st = o.streams[static_cast<std::size_t>(s)];
  if (st.probe_seq && seq >= st.probe_seq) {
    const auto sample = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - st.probe_sent);
    o.min_rtt = o.min_rtt.count() == 0 ? sample : std::min(o.min_rtt, sample);
    st.probe_seq = 0;
  }
  const bool moved = st.q.ack(seq, [this](const ReqPtr& r, std::size_t) { retire(r); });
  if (!moved) return;
  st.failures = 0;
  st.down = false;
  write(peer, s);
  schedule(peer);
}

void WanTransport::break_outbound(int peer, int s, const std::string& why) {
  auto& st = out_[static_cast<std::size_t>(peer)].streams[static_cast<std::size_t>(s)];
  if (out_[static_cast<std::size_t>(peer)].departing) {
    // The peer is leaving: this stream closing is its last word, not a fault to repair.
    st.farewell = true;
    return settle_departure(peer);
  }
  boost::system::error_code ec;
  if (st.sock) st.sock->close(ec);
  st.sock.reset();
  st.last_error = why;
  if (st.connected) {
    ++reconnects_;
    log::info("WAN link: stream " + std::to_string(s) + " to rank " + std::to_string(peer) + " broke (" + why +
              "); dialling it again");
  }
  st.connected = false;
  st.writing = false;
  st.q.release([this](const ReqPtr& r, std::size_t) { retire(r); });  // closing the socket ended its write
  st.q.rewind();        // everything unacknowledged goes again on the next connection
  st.probe_seq = 0;     // its acknowledgement would time the break, not the path
  const auto now = Clock::now();
  if (!st.down) {
    st.down = true;
    st.down_since = now;
  }
  st.failures = std::min(st.failures + 1, 8);
  const auto backoff = std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds(5) * (1 << st.failures), std::chrono::milliseconds(1000));
  st.retry_at = now + backoff;
  next_due_ = std::min(next_due_, st.retry_at);
  if (now - st.down_since > opt_.reconnect_for) fail_peer(peer, why);
}

// A stream whose bytes went unacknowledged for options().stall: the path forgot the flow
// (a NAT or firewall that drops what it no longer knows, silently). The peer's other
// streams idle as long were most likely forgotten too: dialled again now, each would
// otherwise cost its own stall at its next send.
void WanTransport::break_idle_outbound(int peer) {
  auto& o = out_[static_cast<std::size_t>(peer)];
  for (std::size_t s = 0; s < o.streams.size(); ++s) {
    const auto& st = o.streams[s];
    if (st.connected && !st.writing && st.q.empty())
      break_outbound(peer, static_cast<int>(s), "another stream to the peer stalled: this idle one is dialled again too");
  }
}

void WanTransport::settle_departure(int peer) {
  const auto& o = out_[static_cast<std::size_t>(peer)];
  if (!o.failed.empty()) return;
  for (const auto& st : o.streams)
    if ((st.sock && !st.farewell) || !st.delayed_acks.empty()) return;  // acknowledgements may still come
  fail_peer(peer, "rank " + std::to_string(peer) + " closed its WAN link");
}

void WanTransport::fail_peer(int peer, const std::string& why) {
  auto& o = out_[static_cast<std::size_t>(peer)];
  if (!o.failed.empty()) return;
  o.failed = why;
  const std::string msg = "rank " + std::to_string(peer) + ": " + why;
  o.fail_pending(msg);
  early_total_.fetch_sub(o.early_sends, std::memory_order_relaxed);
  o.early_sends = 0;
  o.owned_bytes = 0;  // the copies go with their frames
  boost::system::error_code ec;
  for (auto& st : o.streams) {
    st.q.clear([&](const ReqPtr& req) { req->fail(msg); });
    if (st.sock) st.sock->close(ec);
    st.sock.reset();
    st.connected = false;
  }
}

}  // namespace strata::wan
