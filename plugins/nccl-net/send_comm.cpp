#include "send_comm.hpp"

#include <poll.h>

#include <algorithm>
#include <climits>

#include "errors.hpp"
#include "log.hpp"
#include "link/crc32c.hpp"
#include "link/striping.hpp"

namespace strata::nccl_net {

namespace {
// Frames gathered into one sendmsg: small messages then cost one system call per batch.
constexpr int kBatchFrames = 32;
}  // namespace

std::int64_t steady_ns() {
  // CLOCK_MONOTONIC: the same clock in both processes of an emulated link on one machine.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

SendComm::SendComm(std::vector<Wire> streams, const LinkOptions& options, std::string peer,
                   RejoinListener rejoins)
    : TransferComm(Kind::send, Path::tcp, std::move(peer)), opt_(options), rejoins_(std::move(rejoins)) {
  for (Wire& w : streams) {
    Stream s;
    s.wire = std::move(w);
    streams_.push_back(std::move(s));
  }
  // Striped: a stream gets its next stripe only once it has written the last, so a slow
  // stream takes fewer (the adaptive rule of link/striping.hpp). Direct: one stream, and
  // queueing many frames lets small messages share a system call.
  max_unwritten_ = opt_.striped ? 1 : kBatchFrames;
  loads_.resize(streams_.size());
}

Request* SendComm::isend(const void* data, std::size_t size, int tag) {
  check();
  Request* r = pool_.get(this);
  if (!r) return nullptr;
  r->size = size;
  pending_.push_back({r, static_cast<const char*>(data), tag, next_msg_id_++, 0});
  poll();  // start writing now: NCCL may not test this request for a while
  return r;
}

void SendComm::progress() {
  // Frame timestamps matter only to delay emulation and to how long a stream is down.
  const std::int64_t now = opt_.delay.count() > 0 || opt_.acks ? steady_ns() : 0;
  bool moved = true;
  while (moved) {
    moved = false;
    if (any_down()) moved |= restore();
    if (opt_.acks)
      for (Stream& s : streams_) moved |= read_acks(s, now);
    moved |= assign(now);
    for (Stream& s : streams_) moved |= write(s, now);
  }
  const bool in_flight = !pending_.empty() || std::any_of(streams_.begin(), streams_.end(),
                                                          [](const Stream& s) { return !s.q.empty(); });
  if (receiver_closed_ && in_flight)
    throw NetError(abi::remote_error, "peer closed the connection with sends in flight");
  for (std::size_t i = 0; i < streams_.size(); ++i) {
    const Stream& s = streams_[i];
    if (s.down_since && in_flight && now - s.down_since > std::chrono::nanoseconds(opt_.reconnect_for).count())
      throw NetError(abi::remote_error, "stream " + std::to_string(i) + " broke (" + s.why +
                                            ") and was not redialled within " +
                                            std::to_string(opt_.reconnect_for.count()) + " ms");
  }
}

bool SendComm::assign(std::int64_t now_ns) {
  bool any = false;
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    const std::size_t remaining = p.req->size - p.next_offset;
    const std::size_t len = std::min(remaining, opt_.frame_bytes);
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      const Stream& s = streams_[i];
      loads_[i].ready = s.wire && s.q.unwritten() < max_unwritten_;
      loads_[i].unacked = s.q.unacked_bytes();
    }
    const std::size_t window = opt_.acks ? opt_.window : SIZE_MAX;
    const int pick = link::pick_stream(loads_, len, window);
    if (pick < 0) break;
    Stream& s = streams_[static_cast<std::size_t>(pick)];

    link::FrameHeader h = link::stripe(p.msg_id, p.next_offset, p.req->size, static_cast<std::uint32_t>(p.tag), len);
    h.sent_ns = now_ns;
    const char* payload = len ? p.data + p.next_offset : nullptr;
    s.q.push(h, payload, opt_.checksum && len ? link::crc32c(payload, len) : 0, p.req);
    ++p.req->stripes_left;
    p.next_offset += len;
    any = true;
    if (p.next_offset == p.req->size) {  // a zero-byte message still sends its one frame
      p.req->all_assigned = true;
      pending_.pop_front();
    }
  }
  return any;
}

bool SendComm::write(Stream& s, std::int64_t now_ns) {
  if (!s.wire) return false;
  bool any = false;
  try {
    any = s.wire.flush();  // TLS: what an earlier write staged goes first
  } catch (const NetError& e) {
    broken(s, e.what());
    return true;
  }
  if (s.q.unwritten() == 0) return any;
  if (opt_.cut_after && &s == &streams_[0] && !cut_done_ && s.frames_written >= opt_.cut_after) {
    // Like a middlebox resetting the flow once what was written is through: the receiver
    // reads it all, sees the end, and redials. The socket stays open, or closing it with
    // acknowledgements unread would reset the connection and lose those bytes instead.
    cut_done_ = true;
    cut(s.wire.fd());
    cut_wire_ = std::move(s.wire);
    broken(s, "emulated cut");
    return true;
  }
  if (s.blocked) {
    if (!s.wire.ready(POLLOUT)) return any;
    s.blocked = false;
  }
  while (s.q.unwritten() > 0) {
    iovec iov[2 * kBatchFrames];
    int n = 0;
    std::size_t want = 0;
    for (std::size_t i = 0; i < s.q.unwritten() && n < 2 * kBatchFrames; ++i) {
      auto& f = s.q.unwritten_frame(i, now_ns);
      std::size_t skip = f.put;
      if (skip < link::kHeaderBytes) {
        iov[n++] = {f.wire.data() + skip, link::kHeaderBytes - skip};
        skip = 0;
      } else {
        skip -= link::kHeaderBytes;
      }
      if (f.h.length > skip) iov[n++] = {const_cast<char*>(f.payload) + skip, f.h.length - skip};
      want += f.wire_bytes() - f.put;
    }
    std::size_t sent = 0;
    try {
      sent = s.wire.send_some(iov, n);
    } catch (const NetError& e) {
      broken(s, e.what());
      return true;
    }
    s.blocked = sent < want;
    if (sent == 0) break;
    any = true;
    s.frames_written += s.q.wrote(sent).frames;
    // Direct: a written frame is done; nothing will acknowledge it.
    if (!opt_.acks) s.q.ack(s.q.last_written(), [this](Request* r, std::size_t) { retire(r); });
  }
  return any;
}

bool SendComm::read_acks(Stream& s, std::int64_t now_ns) {
  bool any = false;
  if (s.wire && s.ack_starved && s.wire.ready(POLLIN)) s.ack_starved = false;
  while (s.wire && !s.ack_starved) {
    bool eof = false;
    std::size_t got = 0;
    try {
      got = s.wire.recv_some(s.ack.data() + s.ack_got, link::kHeaderBytes - s.ack_got, &eof);
    } catch (const NetError& e) {
      broken(s, e.what());
      break;
    }
    if (eof) {
      if (receiver_closed_) s.wire = Wire();  // after its goodbye: the end, not a break
      else broken(s, "the receiver's end closed");
      break;
    }
    if (got == 0) {
      s.ack_starved = true;
      break;
    }
    s.ack_got += got;
    if (s.ack_got < link::kHeaderBytes) continue;
    s.ack_got = 0;
    const link::Reply r = link::read_reply(s.ack.data());
    if (r.kind == link::Reply::Kind::goodbye) {
      receiver_closed_ = true;
    } else if (r.kind == link::Reply::Kind::broken) {
      broken(s, r.why);
    } else {
      s.delayed_acks.emplace_back(r.h.sent_ns + opt_.delay.count(), r.h.seq);
    }
  }
  // Emulated delay: an ack counts only one delay after the receiver sent it.
  while (!s.delayed_acks.empty() && (opt_.delay.count() == 0 || s.delayed_acks.front().first <= now_ns)) {
    s.q.ack(s.delayed_acks.front().second, [this](Request* r, std::size_t) { retire(r); });
    s.delayed_acks.pop_front();
    any = true;
  }
  return any;
}

void SendComm::broken(Stream& s, const std::string& why) {
  if (!opt_.rejoin) throw NetError(abi::remote_error, why);
  if (!s.wire && s.down_since) return;
  const auto index = static_cast<int>(&s - streams_.data());
  log::warn("stream %d to %s broke (%s); waiting for the receiver to redial it", index, peer().c_str(),
            why.c_str());
  s.wire = Wire();
  s.blocked = s.ack_starved = false;
  s.ack_got = 0;
  s.q.rewind();
  if (!s.down_since) s.down_since = steady_ns();
  s.why = why;
}

bool SendComm::any_down() const {
  return std::any_of(streams_.begin(), streams_.end(), [](const Stream& s) { return s.down_since != 0; });
}

bool SendComm::restore() {
  bool any = false;
  for (;;) {
    Wire wire;
    const int index = rejoins_.poll(&wire);
    if (index < 0) return any;
    Stream& s = streams_[static_cast<std::size_t>(index)];
    s.wire = std::move(wire);  // replaces the old socket if its break was not seen here yet
    s.blocked = s.ack_starved = false;
    s.ack_got = 0;
    s.q.rewind();
    s.down_since = 0;
    log::info("stream %d to %s redialled; resending %zu unacknowledged frame(s)", index, peer().c_str(),
              s.q.frames());
    any = true;
  }
}

void SendComm::retire(Request* r) {
  if (--r->stripes_left == 0 && r->all_assigned) r->done = true;
}

}  // namespace strata::nccl_net
