#include "recv_comm.hpp"

#include <poll.h>

#include <algorithm>
#include <limits>

#include "errors.hpp"
#include "log.hpp"
#include "send_comm.hpp"
#include "link/crc32c.hpp"

namespace strata::nccl_net {

namespace {
constexpr std::size_t kScratch = 64 << 10;
[[noreturn]] void broken(const std::string& what) { throw NetError(abi::remote_error, what); }
}  // namespace

RecvComm::RecvComm(std::vector<Wire> streams, const LinkOptions& options, std::string peer, const Hello& first)
    : TransferComm(Kind::recv, Path::tcp, std::move(peer)), opt_(options), first_(first) {
  for (Wire& w : streams) {
    Stream s;
    s.wire = std::move(w);
    s.reader = link::FrameReader(std::numeric_limits<std::uint32_t>::max(), opt_.checksum);
    streams_.push_back(std::move(s));
  }
  if (opt_.rejoin) {
    rejoin_addr_ = remote_address(streams_[0].wire.fd(), &rejoin_len_);
    set_port(rejoin_addr_, static_cast<std::uint16_t>(first.reserved));
    scratch_.resize(kScratch);
  }
}

RecvComm::~RecvComm() {
  if (!opt_.rejoin) return;
  if (dropped_)
    log::info("closing the connection from %s: %llu resent frame(s) that had already arrived were dropped",
              peer().c_str(), static_cast<unsigned long long>(dropped_));
  link::FrameHeader h;
  h.kind = link::FrameKind::goodbye;
  h.sent_ns = steady_ns();
  const link::EncodedHeader bye = link::seal(h, 0);
  for (Stream& s : streams_) {
    if (!s.wire || s.ack_writing) continue;  // inside a half-written ack it would garble both
    const iovec iov{const_cast<unsigned char*>(bye.data()), bye.size()};
    try {
      s.wire.flush();  // TLS: an ack still staged goes first
      s.wire.send_some(&iov, 1);
    } catch (const NetError&) {
      // Best effort: the sender then sees the stream close instead.
    }
  }
}

Request* RecvComm::irecv(int n, void* const* data, const std::size_t* sizes, const int* tags) {
  check();
  Request* r = pool_.get(this);
  if (!r) return nullptr;
  r->n = n;
  for (int i = 0; i < n; ++i) r->slots[i] = Slot{static_cast<char*>(data[i]), sizes[i], tags[i]};
  posted_.push_back(r);
  poll();
  return r;
}

void RecvComm::progress() {
  bool moved = true;
  std::int64_t now = 0;
  while (moved) {
    moved = false;
    const bool down = std::any_of(streams_.begin(), streams_.end(), [](const Stream& s) { return s.down_since; });
    now = opt_.delay.count() > 0 || down ? steady_ns() : 0;  // only delay and redials need it
    for (Stream& s : streams_) {
      while (!s.delayed.empty() && s.delayed.front().due_ns <= now) {
        deliver(s, s.delayed.front());
        s.delayed.pop_front();
        moved = true;
      }
      if (s.down_since) moved |= redial(s, now);
      if (!s.eof) moved |= pump(s);
      if (opt_.acks) moved |= send_ack(s);
    }
  }
  const bool waiting = !posted_.empty() || !msgs_.empty();
  for (const Stream& s : streams_)
    if (waiting && s.down_since && now - s.down_since > std::chrono::nanoseconds(opt_.reconnect_for).count())
      broken("stream " + std::to_string(index(s)) + " broke (" + s.why + ") and could not be redialled within " +
             std::to_string(opt_.reconnect_for.count()) + " ms");
  const bool all_closed = std::all_of(streams_.begin(), streams_.end(),
                                      [](const Stream& s) { return s.eof && s.delayed.empty(); });
  if (all_closed && waiting) broken("peer closed the connection with receives pending");
}

// A stream's reader fed by non-blocking reads straight from its socket: headers into the
// reader, payloads into the matched receive's buffer, resends into scratch.
struct RecvComm::FrameIo {
  RecvComm& c;
  Stream& s;

  std::size_t read(unsigned char* into, std::size_t max, bool* stop) {
    bool eof = false;
    const std::size_t got = recv(into, max, &eof, stop);
    if (*stop || !eof) return got;
    *stop = true;
    if (s.reader.header_partial()) {
      c.break_stream(s, "peer closed the connection inside a frame header");
    } else if (c.opt_.rejoin) {
      c.break_stream(s, "the sender's end closed");  // the redial tells a closed comm from a cut
    } else {
      s.eof = true;
    }
    return 0;
  }
  std::span<const unsigned char> read_payload(std::size_t max, bool* stop) {
    const bool drop = s.reader.dropping();
    char* into = drop ? c.scratch_.data() : s.dest + s.reader.payload_done();
    bool eof = false;
    const std::size_t got = recv(into, drop ? std::min(max, c.scratch_.size()) : max, &eof, stop);
    if (eof) {
      *stop = true;
      c.break_stream(s, "peer closed the connection inside a frame");
    }
    return {reinterpret_cast<const unsigned char*>(into), *stop ? 0 : got};
  }
  link::Verdict on_header(const link::InCursor::Header& h) {
    using Kind = link::InCursor::Header::Kind;
    if (h.kind == Kind::goodbye) {
      c.break_stream(s, "unexpected frame kind on a data stream");
      return link::Verdict::stop;
    }
    if (h.kind == Kind::broken || (h.kind == Kind::resent && !c.opt_.rejoin)) {
      c.break_stream(s, h.kind == Kind::broken ? h.why : "frame " + std::to_string(h.h.seq) + " repeated");
      return link::Verdict::stop;
    }
    if (h.kind == Kind::resent) return link::Verdict::drop;
    return c.resolve(s, h.h) ? link::Verdict::take : link::Verdict::hold;
  }
  bool on_frame(const link::FrameHeader& h, bool dropped) {
    if (dropped) {
      ++c.dropped_;
      return true;
    }
    const Arrival a{h.sent_ns + c.opt_.delay.count(), h.seq, h.msg_id, h.length};
    if (c.opt_.delay.count() > 0)
      s.delayed.push_back(a);
    else
      c.deliver(s, a);
    return true;
  }
  void on_broken(const std::string& why) { c.break_stream(s, why); }

  // 0 with neither eof nor stop: nothing to read now, so poll before reading again.
  std::size_t recv(void* into, std::size_t max, bool* eof, bool* stop) {
    std::size_t got = 0;
    try {
      got = s.wire.recv_some(into, max, eof);
    } catch (const NetError& e) {
      c.break_stream(s, e.what());
      *stop = true;
      return 0;
    }
    if (got == 0 && !*eof) s.starved = true;
    return got;
  }
};

bool RecvComm::pump(Stream& s) {
  if (!s.wire) return false;
  if (s.starved) {
    if (!s.wire.ready(POLLIN)) return false;
    s.starved = false;
  }
  FrameIo io{*this, s};
  return link::read_frames(s.reader, io).moved;
}

bool RecvComm::resolve(Stream& s, const link::FrameHeader& h) {
  auto it = msgs_.find(h.msg_id);
  if (it == msgs_.end()) {
    if (h.msg_id < next_match_) broken("frame of message " + std::to_string(h.msg_id) + " after it completed");
    if (h.msg_id > next_match_ || posted_.empty()) return false;
    Request* r = posted_.front();
    int slot = -1;
    for (int i = 0; i < r->n; ++i)
      if (!r->slots[i].matched && static_cast<std::uint32_t>(r->slots[i].tag) == h.tag) slot = i;
    if (slot < 0)
      broken("message with tag " + std::to_string(static_cast<int>(h.tag)) +
             " matches no buffer of the pending receive");
    Slot& sl = r->slots[slot];
    if (h.total > sl.capacity)
      broken("message of " + std::to_string(h.total) + " bytes does not fit the " +
             std::to_string(sl.capacity) + "-byte receive buffer");
    sl.matched = true;
    sl.bytes = h.total;
    if (++r->slots_matched == r->n) posted_.pop_front();
    it = msgs_.emplace(h.msg_id, InMsg{r, slot, h.total, 0}).first;
    ++next_match_;
  }
  const InMsg& m = it->second;
  if (h.total != m.total)
    broken("frame of message " + std::to_string(h.msg_id) + " says " + std::to_string(h.total) +
           " bytes where an earlier one said " + std::to_string(m.total));
  s.dest = h.length ? m.req->slots[m.slot].buf + h.offset : nullptr;
  return true;
}

void RecvComm::deliver(Stream& s, const Arrival& a) {
  s.reader.cursor().delivered(a.seq);
  auto it = msgs_.find(a.msg_id);
  InMsg& m = it->second;
  m.received += a.length;
  if (m.received < m.total) return;
  Request* r = m.req;
  msgs_.erase(it);
  if (++r->slots_done == r->n) r->done = true;
}

bool RecvComm::send_ack(Stream& s) {
  if (!s.wire) return false;
  bool flushed = false;
  try {
    flushed = s.wire.flush();  // TLS: the last ack may still be staged
  } catch (const NetError& e) {
    break_stream(s, e.what());
    return true;
  }
  if (!s.ack_writing) {
    if (!s.reader.cursor().ack_due()) return flushed;
    s.ack = *s.reader.cursor().take_ack(steady_ns());
    s.ack_written = 0;
    s.ack_writing = true;
  }
  const iovec iov{s.ack.data() + s.ack_written, link::kHeaderBytes - s.ack_written};
  std::size_t n = 0;
  try {
    n = s.wire.send_some(&iov, 1);
  } catch (const NetError& e) {
    break_stream(s, e.what());
    return true;
  }
  s.ack_written += n;
  if (s.ack_written == link::kHeaderBytes) s.ack_writing = false;
  return flushed || n > 0;
}

void RecvComm::break_stream(Stream& s, const std::string& why) {
  if (!opt_.rejoin) broken(why);
  log::warn("stream %d from %s broke (%s); redialling", index(s), peer().c_str(), why.c_str());
  s.wire = Wire();
  s.reader.reset();
  s.ack_written = 0;
  s.ack_writing = false;
  s.starved = false;
  s.down_since = s.retry_at = steady_ns();
  s.failures = 0;
  s.why = why;
}

bool RecvComm::redial(Stream& s, std::int64_t now_ns) {
  if (!s.redial) {
    if (now_ns < s.retry_at) return false;
    try {
      s.redial = std::make_unique<Redial>(rejoin_addr_, rejoin_len_, first_, index(s), opt_.tuning, opt_.tls);
    } catch (const NetError&) {
      retry_later(s, now_ns);
      return false;
    }
  }
  Redial::State state = Redial::State::pending;
  try {
    state = s.redial->step();
  } catch (const NetError&) {
    retry_later(s, now_ns);
    return false;
  }
  if (state == Redial::State::pending) return false;
  s.down_since = 0;
  if (state == Redial::State::refused) {  // the sender's comm is gone: nothing more comes
    log::info("stream %d from %s: the sender has closed (redial refused)", index(s), peer().c_str());
    s.redial.reset();
    s.eof = true;
    return true;
  }
  s.wire = s.redial->take();
  s.redial.reset();
  s.reader.cursor().rejoined();
  log::info("stream %d from %s redialled", index(s), peer().c_str());
  return true;
}

void RecvComm::retry_later(Stream& s, std::int64_t now_ns) {
  s.redial.reset();
  s.failures = std::min(s.failures + 1, 8);
  const std::int64_t backoff = std::min<std::int64_t>(5'000'000ll << s.failures, 1'000'000'000ll);
  s.retry_at = now_ns + backoff;
}

}  // namespace strata::nccl_net
