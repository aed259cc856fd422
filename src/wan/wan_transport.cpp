#include "wan/wan_transport.hpp"

#include <array>
#include <cstring>
#include <span>

#include "strata/errors.hpp"

namespace strata::wan {

namespace asio = boost::asio;
using asio::ip::tcp;

WanTransport::WanTransport(int rank, int size, const std::string& bind_host, WanOptions options)
    : AsioTransport("wan transport", rank, bind_host, options.sockets, options.tuning.buffer),
      opt_(std::move(options)),
      tls_(opt_.tls.on ? std::make_unique<TlsContext>(opt_.tls, opt_.secret) : nullptr),
      gate_("wan link of rank " + std::to_string(rank), opt_.secret, bootstrap::auth::Channel::wan, 8,
            bootstrap::auth::GateLimits{opt_.sockets.handshake}),
      out_(static_cast<std::size_t>(size)),
      in_(static_cast<std::size_t>(size)),
      rng_(std::random_device{}() ^ static_cast<std::uint64_t>(rank)),
      buffers_(opt_.send_buffer) {
  if (opt_.streams < 1) throw InvalidArgument("wan transport: need at least one stream");
  if (opt_.latency_streams < 0) throw InvalidArgument("wan transport: a negative count of latency streams");
  if (opt_.emulation.window) {
    opt_.window = opt_.emulation.window;
    // A stripe larger than the window could only ever travel alone.
    opt_.stripe_bytes = std::min(opt_.stripe_bytes, opt_.window);
  }
  opt_.stripe_bytes = std::max<std::size_t>(opt_.stripe_bytes, 4096);
  const auto now = Clock::now();
  const double rate = opt_.emulation.rate_bytes_per_s;
  if (opt_.all_streams() > kMaxStreams)
    throw InvalidArgument("wan transport: at most " + std::to_string(kMaxStreams) + " streams per peer");
  for (auto& i : in_) i.streams.resize(static_cast<std::size_t>(opt_.all_streams()));
  for (auto& o : out_) {
    o.streams.resize(static_cast<std::size_t>(opt_.all_streams()));
    // Narrow from the start (link::next_bulk_width says why).
    if (opt_.narrow_streams > 0 && opt_.narrow_streams < opt_.streams)
      o.bulk_width = static_cast<std::size_t>(opt_.narrow_streams);
    if (rate > 0)
      o.bucket = TokenBucket(rate, std::max<double>(rate * 0.005, double(opt_.stripe_bytes + link::kHeaderBytes)), now);
  }
  accept();
}

WanTransport::~WanTransport() {
  if (!aborted()) {
    // Completed sends may still be on their way: see them acknowledged first (a peer
    // that fails meanwhile is given up on, and the wait is bounded).
    drain_owned(std::min<std::chrono::milliseconds>(opt_.reconnect_for, std::chrono::seconds(30)));
    // Finish writes already queued (acknowledgements above all) before saying goodbye.
    net_.poll();
  }
  close_all();
  // Let cancelled handlers run now, while the members they check still exist.
  net_.poll();
}



std::int64_t WanTransport::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}


RequestPtr WanTransport::isend(int peer, Tag tag, const void* buf, std::size_t bytes) {
  if (peer == rank_ && !aborted()) return send_to_self(tag, buf, bytes);
  auto& out = out_.at(static_cast<std::size_t>(peer));
  auto req = new_request<WanRequest>(peer, tag, buf, bytes, out.failed);
  if (req->done()) return req;
  req->stripe = stripe_of(out, bytes);
  req->stripes_left = bytes == 0 ? 1 : (bytes + req->stripe - 1) / req->stripe;
  if (bytes > 0 && worth_owning(out, bytes)) {
    // The link owns the bytes from here: the caller's buffer is free at once.
    req->owned = buffers_.take(bytes);
    std::memcpy(req->owned.data.get(), buf, bytes);
    out.owned_bytes += bytes;
    req->early = true;
  } else if (bytes == 0 && opt_.send_buffer > 0) {
    req->early = true;  // nothing to keep: its frame still goes, in order
  }
  if (req->early) {
    ++out.early_sends;
    early_total_.fetch_add(1, std::memory_order_relaxed);
    req->complete(bytes);
  }
  out.pending[lane_of(bytes)].push_back(PendingSend{req, out.next_msg_id++, 0});
  count(payload_sent_, bytes);
  next_due_ = Clock::time_point::min();  // the next progress() schedules it
  return req;
}

RequestPtr WanTransport::send_to_self(Tag tag, const void* buf, std::size_t bytes) {
  auto& in = in_[static_cast<std::size_t>(rank_)];
  transport::deliver_to_self(rank_, tag, buf, bytes, in.posted, in.unexpected, buffers_,
                             [tag](transport::BufferPool::Buffer copy, std::size_t n) {
                               auto m = std::make_shared<InMsg>();
                               m->tag = tag;
                               m->total = m->received = n;
                               m->staging = std::move(copy);
                               m->dest = m->staging.data.get();
                               m->matched = m->complete = true;
                               return m;
                             });
  auto req = std::make_shared<WanRequest>(rank_, tag, const_cast<void*>(buf), bytes);
  req->complete(bytes);
  return req;
}

RequestPtr WanTransport::irecv(int peer, Tag tag, void* buf, std::size_t capacity) {
  auto req = new_request<WanRequest>(peer, tag, buf, capacity);
  if (req->done()) return req;
  auto& in = in_.at(static_cast<std::size_t>(peer));
  InMsgPtr m = in.unexpected.take(tag);
  if (!m && no_more_messages(in)) {
    req->fail(departed(peer));
    return req;
  }
  if (!m) {
    in.posted.push(tag, req);
    // A stream may be stalled on this receive's message: let it look again.
    for (int s = 0; s < opt_.all_streams(); ++s) {
      auto& st = in.streams[static_cast<std::size_t>(s)];
      if (!st.stalled || !st.sock) continue;
      st.stalled = false;
      pump(peer, s);
    }
    return req;
  }
  if (m->total > capacity) {
    req->fail(transport::truncation(peer, m->total, capacity));
    m->dest = nullptr;  // the rest of its stripes are dropped
  } else {
    // Copy what has arrived and let the rest land in the caller's buffer directly.
    if (m->total) std::memcpy(buf, m->staging.data.get(), m->total);
    m->dest = static_cast<char*>(buf);
    if (m->complete) {
      req->complete(m->total);
    } else if (in.gone) {
      req->fail(departed(peer));
      m->dest = nullptr;
    } else {
      m->req = req;
    }
  }
  // Safe to free: payload only ever streams into staging synchronously (see pump).
  unstage(*m);
  return req;
}

bool WanTransport::progress() {
  // Peers cannot reach a rank that cannot accept them: say why now, not at the deadline.
  if (net_.must_abort()) {
    apply_abort();
    return false;
  }
  bool any = false;
  const auto now = Clock::now();
  if (now >= next_due_) {
    next_due_ = Clock::time_point::max();
    for (int p = 0; p < size(); ++p) {
      auto& in = in_[static_cast<std::size_t>(p)];
      for (std::size_t s = 0; s < in.streams.size(); ++s) {
        auto& d = in.streams[s].delayed;
        while (!d.empty() && d.front().due <= now) {
          const Arrival a = std::move(d.front());
          d.pop_front();
          deliver(p, static_cast<int>(s), a);
          any = true;
        }
        if (!d.empty()) next_due_ = std::min(next_due_, d.front().due);
      }
      if (in.departing) settle_inbound(p);
      if (p != rank_) service_outbound(p, now);
    }
  }
  sample_paths(now);
  return net_.poll() || any;
}

void WanTransport::wait_event(std::chrono::microseconds max) {
  if (aborted()) return apply_abort();
  const auto now = Clock::now();
  if (next_due_ <= now) {
    progress();
    return;
  }
  auto wait = max;
  if (next_due_ != Clock::time_point::max())
    wait = std::min(wait, std::chrono::duration_cast<std::chrono::microseconds>(next_due_ - now) +
                              std::chrono::microseconds(1));
  net_.run_one_for(wait);
}

void WanTransport::abort(const std::string& why) {
  net_.abort(why);
}

transport::TrafficCounters WanTransport::traffic() const {
  transport::TrafficCounters c;
  c.wan_payload_sent = payload_sent_.load(std::memory_order_relaxed);
  c.wan_wire_sent = wire_sent_.load(std::memory_order_relaxed);
  c.wan_payload_received = payload_received_.load(std::memory_order_relaxed);
  c.wan_resent = resent_.load(std::memory_order_relaxed);
  return c;
}


void WanTransport::apply_abort() {
  if (abort_applied_) return;
  abort_applied_ = true;
  const std::string why = abort_reason();
  for (auto& o : out_) {
    o.fail_pending(why);
    for (auto& s : o.streams) {
      s.q.clear([&](const ReqPtr& req) { req->fail(why); });
    }
  }
  for (auto& i : in_) {
    i.posted.for_each([&](ReqPtr& r) { r->fail(why); });
    i.posted.clear();
    for (auto& [id, m] : i.msgs)
      if (m->req) m->req->fail(why);
  }
  close_all();
}

void WanTransport::say_goodbye() {
  const std::int64_t stamp = now_ns();
  // Only where no write is under way (the frame must not land inside another), and
  // without blocking: a full socket buffer means the peer will see the close instead.
  auto send = [&](const SocketPtr& sock, const link::EncodedHeader& bye, const link::EncodedHeader* ack) {
    boost::system::error_code ec;
    std::array<boost::asio::const_buffer, 2> bufs{boost::asio::buffer(bye), boost::asio::buffer(bye)};
    if (ack) bufs[0] = boost::asio::buffer(*ack);
    const auto some = ack ? std::span<const boost::asio::const_buffer>(bufs) : std::span<const boost::asio::const_buffer>(bufs).first(1);
    count(wire_sent_, sock->try_write(some, ec));
  };
  for (std::size_t p = 0; p < out_.size(); ++p) {
    // Tells the peer how many messages to expect from us in all, so it can fail a
    // receive no message can satisfy at once and keep waiting for the rest.
    link::FrameHeader h;
    h.kind = link::FrameKind::goodbye;
    h.sent_ns = stamp;
    h.msg_id = out_[p].next_msg_id;
    const link::EncodedHeader bye = link::seal(h, 0);
    for (auto& s : out_[p].streams)
      if (s.sock && s.connected && !s.writing) send(s.sock, bye, nullptr);
    for (auto& s : in_[p].streams) {
      if (!s.sock || s.ack_writing) continue;
      // Acknowledge everything delivered first: the goodbye ends the peer's wait for
      // acknowledgements, and a delivered send must not be left unacknowledged.
      if (const auto ack = s.reader.cursor().take_ack(stamp)) {
        s.ack_out = *ack;
        send(s.sock, bye, &s.ack_out);
      } else {
        send(s.sock, bye, nullptr);
      }
    }
  }
}

std::string WanTransport::departed(int peer) const {
  return "rank " + std::to_string(peer) +
         " closed its WAN link (its communicator was destroyed or aborted); nothing more will come from it";
}

void WanTransport::on_goodbye(int peer, std::uint64_t sent_msgs) {
  auto& in = in_[static_cast<std::size_t>(peer)];
  auto& out = out_[static_cast<std::size_t>(peer)];
  if (!in.departing) {
    in.departing = true;
    in.sent_msgs = sent_msgs;
  }
  // It will not come back: a stream of ours that breaks now is its close, not a fault.
  out.departing = true;
  settle_inbound(peer);
  settle_departure(peer);
}

void WanTransport::settle_inbound(int peer) {
  auto& in = in_[static_cast<std::size_t>(peer)];
  if (!in.departing || in.gone) return;
  bool quiet = true;
  for (const auto& st : in.streams) quiet = quiet && !st.sock && st.delayed.empty();
  if (quiet) in.gone = true;
  if (!no_more_messages(in)) return;
  const std::string why = departed(peer);
  in.posted.for_each([&](ReqPtr& r) { r->fail(why); });
  in.posted.clear();
  if (!in.gone) return;
  for (auto& [id, m] : in.msgs)
    if (m->req && !m->complete) {
      m->req->fail(why);
      m->req.reset();
      m->dest = nullptr;  // no late stripe may land in the caller's buffer
    }
}

void WanTransport::close_all() {
  // Closing stops every read in progress, so no late bytes land in a caller's buffer.
  say_goodbye();
  boost::system::error_code ec;
  net_.close_listener();
  for (auto& o : out_)
    for (auto& s : o.streams)
      if (s.sock) {
        s.sock->close(ec);
        s.sock.reset();
        s.connected = false;
      }
  for (auto& i : in_)
    for (auto& s : i.streams)
      if (s.sock) {
        s.sock->close(ec);
        s.sock.reset();
      }
}

}  // namespace strata::wan
