#include "send_comm.hpp"

#include <poll.h>

#include <algorithm>
#include <climits>

#include "errors.hpp"
#include "wan/crc32c.hpp"
#include "wan/striping.hpp"

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

SendComm::SendComm(std::vector<Fd> streams, const LinkOptions& options, std::string peer)
    : TransferComm(Kind::send, Path::tcp, std::move(peer)), opt_(options) {
  for (Fd& fd : streams) {
    Stream s;
    s.fd = std::move(fd);
    streams_.push_back(std::move(s));
  }
  // Striped: a stream gets its next stripe only once it has written the last, so a slow
  // stream takes fewer (the adaptive rule of wan/striping.hpp). Direct: one stream, and
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
  // Frame timestamps matter only to delay emulation; without it, skip the clock.
  const std::int64_t now = opt_.delay.count() > 0 || opt_.acks ? steady_ns() : 0;
  bool moved = true;
  while (moved) {
    moved = false;
    if (opt_.acks)
      for (Stream& s : streams_) moved |= read_acks(s, now);
    moved |= assign(now);
    for (Stream& s : streams_) moved |= write(s);
  }
}

bool SendComm::assign(std::int64_t now_ns) {
  bool any = false;
  std::vector<wan::StreamLoad>& loads = loads_;
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    const std::size_t remaining = p.req->size - p.next_offset;
    const std::size_t len = std::min(remaining, opt_.frame_bytes);
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      const Stream& s = streams_[i];
      loads[i].ready = s.frames.size() - s.next_write < max_unwritten_;
      loads[i].unacked = s.unacked;
    }
    const std::size_t window = opt_.acks ? opt_.window : SIZE_MAX;
    const int pick = wan::pick_stream(loads, len, window);
    if (pick < 0) break;
    Stream& s = streams_[static_cast<std::size_t>(pick)];

    wan::FrameHeader h;
    h.kind = wan::FrameKind::data;
    h.length = static_cast<std::uint32_t>(len);
    h.seq = s.next_seq++;
    h.msg_id = p.msg_id;
    h.offset = p.next_offset;
    h.total = p.req->size;
    h.tag = static_cast<std::uint32_t>(p.tag);
    h.sent_ns = now_ns;
    const char* payload = len ? p.data + p.next_offset : nullptr;
    const std::uint32_t payload_crc = opt_.checksum && len ? wan::crc32c(payload, len) : 0;
    s.frames.push_back({wan::seal(h, payload_crc), payload, len, 0, h.seq, p.req});
    if (opt_.acks) s.unacked += len;
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

bool SendComm::write(Stream& s) {
  bool any = false;
  if (s.next_write == s.frames.size()) return false;
  if (s.blocked) {
    if (!ready(s.fd.get(), POLLOUT)) return false;
    s.blocked = false;
  }
  while (s.next_write < s.frames.size()) {
    iovec iov[2 * kBatchFrames];
    int n = 0;
    for (std::size_t i = s.next_write; i < s.frames.size() && n < 2 * kBatchFrames; ++i) {
      const OutFrame& f = s.frames[i];
      std::size_t skip = f.written;
      if (skip < wan::kHeaderBytes) {
        iov[n++] = {const_cast<unsigned char*>(f.header.data()) + skip, wan::kHeaderBytes - skip};
        skip = 0;
      } else {
        skip -= wan::kHeaderBytes;
      }
      if (f.length > skip) iov[n++] = {const_cast<char*>(f.payload) + skip, f.length - skip};
    }
    std::size_t want = 0;
    for (int i = 0; i < n; ++i) want += iov[i].iov_len;
    std::size_t sent = send_some(s.fd.get(), iov, n);
    s.blocked = sent < want;
    if (sent == 0) break;
    any = true;
    while (sent > 0) {
      OutFrame& f = s.frames[s.next_write];
      const std::size_t take = std::min(sent, wan::kHeaderBytes + f.length - f.written);
      f.written += take;
      sent -= take;
      if (f.written < wan::kHeaderBytes + f.length) break;
      ++s.next_write;
      if (!opt_.acks) {  // direct: written is done
        Request* r = f.req;
        s.frames.pop_front();
        --s.next_write;
        retire(r);
      }
    }
  }
  return any;
}

bool SendComm::read_acks(Stream& s, std::int64_t now_ns) {
  bool any = false;
  if (s.ack_starved && ready(s.fd.get(), POLLIN)) s.ack_starved = false;
  while (!s.ack_starved) {
    bool eof = false;
    const std::size_t got =
        recv_some(s.fd.get(), s.ack.data() + s.ack_got, wan::kHeaderBytes - s.ack_got, &eof);
    if (eof) {
      if (!s.frames.empty() || !pending_.empty())
        throw NetError(abi::remote_error, "peer closed the connection with sends in flight");
      break;
    }
    if (got == 0) {
      s.ack_starved = true;
      break;
    }
    s.ack_got += got;
    if (s.ack_got < wan::kHeaderBytes) continue;
    s.ack_got = 0;
    if (!wan::header_intact(s.ack.data()))
      throw NetError(abi::remote_error, "acknowledgement with a bad header CRC");
    const wan::FrameHeader h = wan::decode(s.ack.data());
    if (h.kind != wan::FrameKind::ack) throw NetError(abi::remote_error, "data frame on an ack path");
    s.delayed_acks.emplace_back(h.sent_ns + opt_.delay.count(), h.seq);
  }
  // Emulated delay: an ack counts only one delay after the receiver sent it.
  while (!s.delayed_acks.empty() && s.delayed_acks.front().first <= now_ns) {
    apply_ack(s, s.delayed_acks.front().second);
    s.delayed_acks.pop_front();
    any = true;
  }
  return any;
}

void SendComm::apply_ack(Stream& s, std::uint64_t seq) {
  // Acks are cumulative and a stream's frames are in seq order.
  while (s.next_write > 0 && s.frames.front().seq <= seq) {
    OutFrame f = s.frames.front();
    s.frames.pop_front();
    --s.next_write;
    s.unacked -= f.length;
    retire(f.req);
  }
}

void SendComm::retire(Request* r) {
  if (--r->stripes_left == 0 && r->all_assigned) r->done = true;
}

}  // namespace strata::nccl_net
