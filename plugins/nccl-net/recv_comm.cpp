#include "recv_comm.hpp"

#include <poll.h>

#include <algorithm>

#include "errors.hpp"
#include "send_comm.hpp"
#include "wan/crc32c.hpp"

namespace strata::nccl_net {

namespace {
[[noreturn]] void broken(const std::string& what) { throw NetError(abi::remote_error, what); }
}  // namespace

RecvComm::RecvComm(std::vector<Fd> streams, const LinkOptions& options, std::string peer)
    : TransferComm(Kind::recv, Path::tcp, std::move(peer)), opt_(options) {
  for (Fd& fd : streams) {
    Stream s;
    s.fd = std::move(fd);
    streams_.push_back(std::move(s));
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
  while (moved) {
    moved = false;
    const std::int64_t now = opt_.delay.count() > 0 ? steady_ns() : 0;  // only delay needs it
    for (Stream& s : streams_) {
      while (!s.delayed.empty() && s.delayed.front().due_ns <= now) {
        deliver(s, s.delayed.front());
        s.delayed.pop_front();
        moved = true;
      }
      if (!s.eof) moved |= pump(s);
      if (opt_.acks) moved |= send_ack(s);
    }
  }
  const bool all_closed = std::all_of(streams_.begin(), streams_.end(),
                                      [](const Stream& s) { return s.eof && s.delayed.empty(); });
  if (all_closed && (!posted_.empty() || !msgs_.empty()))
    broken("peer closed the connection with receives pending");
}

bool RecvComm::pump(Stream& s) {
  bool any = false;
  if (s.starved) {
    if (!ready(s.fd.get(), POLLIN)) return false;
    s.starved = false;
  }
  for (;;) {
    bool eof = false;
    if (!s.have_header) {
      const std::size_t got = recv_some(s.fd.get(), s.raw.data() + s.header_got,
                                        wan::kHeaderBytes - s.header_got, &eof);
      if (eof) {
        if (s.header_got) broken("peer closed the connection inside a frame header");
        s.eof = true;
        return any;
      }
      if (got == 0) {
        s.starved = true;
        return any;
      }
      any = true;
      s.header_got += got;
      if (s.header_got < wan::kHeaderBytes) continue;
      if (!wan::header_intact(s.raw.data())) broken("frame header CRC mismatch");
      s.h = wan::decode(s.raw.data());
      if (s.h.kind != wan::FrameKind::data) broken("unexpected frame kind on a data stream");
      if (s.h.seq != s.expect_seq)
        broken("frame " + std::to_string(s.h.seq) + " where " + std::to_string(s.expect_seq) + " was due");
      ++s.expect_seq;
      s.have_header = true;
    }
    if (!s.in_payload) {
      if (!resolve(s)) return any;  // hold the stream until the message can be matched
      s.in_payload = true;
      s.payload_got = 0;
      s.crc = 0;
    }
    if (s.payload_got < s.h.length) {
      const std::size_t got =
          recv_some(s.fd.get(), s.dest + s.payload_got, s.h.length - s.payload_got, &eof);
      if (eof) broken("peer closed the connection inside a frame");
      if (got == 0) {
        s.starved = true;
        return any;
      }
      any = true;
      if (opt_.checksum) s.crc = wan::crc32c_extend(s.crc, s.dest + s.payload_got, got);
      s.payload_got += got;
      if (s.payload_got < s.h.length) continue;
    }
    if (opt_.checksum && wan::frame_crc(s.crc, s.h) != s.h.crc)
      broken("frame CRC mismatch (message " + std::to_string(s.h.msg_id) + ", offset " +
             std::to_string(s.h.offset) + ")");
    const Arrival a{s.h.sent_ns + opt_.delay.count(), s.h.seq, s.h.msg_id, s.h.length};
    if (opt_.delay.count() > 0)
      s.delayed.push_back(a);
    else
      deliver(s, a);
    s.have_header = s.in_payload = false;
    s.header_got = 0;
    any = true;
  }
}

bool RecvComm::resolve(Stream& s) {
  const wan::FrameHeader& h = s.h;
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
  if (h.total != m.total || h.offset > m.total || h.length > m.total - h.offset)
    broken("frame outside its message (offset " + std::to_string(h.offset) + ", length " +
           std::to_string(h.length) + ", total " + std::to_string(m.total) + ")");
  s.dest = h.length ? m.req->slots[m.slot].buf + h.offset : nullptr;
  return true;
}

void RecvComm::deliver(Stream& s, const Arrival& a) {
  s.delivered_seq = a.seq;
  auto it = msgs_.find(a.msg_id);
  InMsg& m = it->second;
  m.received += a.length;
  if (m.received < m.total) return;
  Request* r = m.req;
  msgs_.erase(it);
  if (++r->slots_done == r->n) r->done = true;
}

bool RecvComm::send_ack(Stream& s) {
  if (!s.ack_writing) {
    if (s.delivered_seq == s.acked_seq) return false;
    wan::FrameHeader h;
    h.kind = wan::FrameKind::ack;
    h.seq = s.delivered_seq;
    h.sent_ns = steady_ns();
    s.ack = wan::seal(h, 0);
    s.acked_seq = s.delivered_seq;
    s.ack_written = 0;
    s.ack_writing = true;
  }
  const iovec iov{s.ack.data() + s.ack_written, wan::kHeaderBytes - s.ack_written};
  const std::size_t n = send_some(s.fd.get(), &iov, 1);
  s.ack_written += n;
  if (s.ack_written == wan::kHeaderBytes) s.ack_writing = false;
  return n > 0;
}

}  // namespace strata::nccl_net
