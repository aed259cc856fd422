// One striped stream's protocol state, without sockets, threads or clocks: what both
// users of the striped link share. libstrata's WAN link drives it from Asio completions
// (wan_sender.cpp, wan_receiver.cpp); the NCCL plugin drives it from its non-blocking
// calls (plugins/nccl-net/send_comm.cpp, recv_comm.cpp). Each decides how bytes move and
// who redials a broken stream; the rules for what goes on the wire and what a frame
// means are here, once.
//
// Sending, OutQueue: frames are numbered per stream, kept until a cumulative ack covers
// them, and after a break rewound, so every unacknowledged frame goes again on the next
// connection. Receiving, InCursor: each header is checked (its own CRC, kind, bounds and
// sequence number); a frame numbered at or below what already arrived is a resend to be
// read and dropped, anything else out of order breaks the stream. After a new connection
// it acknowledges again, so the sender resends only what is missing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "link/frame.hpp"

namespace strata::link {

inline constexpr std::uint64_t kMaxMessageBytes = std::uint64_t{1} << 40;

// The header of stripe [offset, offset + length) of message msg_id (total bytes, tag);
// the queue numbers it and the sender stamps it as it goes out.
inline FrameHeader stripe(std::uint64_t msg_id, std::uint64_t offset, std::uint64_t total, std::uint64_t tag,
                          std::size_t length) {
  FrameHeader h;
  h.length = static_cast<std::uint32_t>(length);
  h.msg_id = msg_id;
  h.offset = offset;
  h.total = total;
  h.tag = tag;
  return h;
}

template <class Ref>
struct OutFrame {
  FrameHeader h;
  std::uint32_t payload_crc = 0;
  const char* payload = nullptr;
  Ref ref{};             // the send it belongs to, retired when acknowledged
  EncodedHeader wire{};  // sealed afresh for each connection it goes out on
  std::size_t put = 0;   // bytes of header + payload written on the current connection
  bool sent = false;     // written whole before: writing it again is a resend
  std::size_t wire_bytes() const { return kHeaderBytes + h.length; }
};

template <class Ref>
class OutQueue {
 public:
  using Frame = OutFrame<Ref>;

  // Numbers a stripe (h: msg_id, offset, total, tag, length) and queues it unwritten.
  Frame& push(FrameHeader h, const char* payload, std::uint32_t payload_crc, Ref ref) {
    h.kind = FrameKind::data;
    h.seq = next_seq_++;
    Frame f;
    f.h = h;
    f.payload_crc = payload_crc;
    f.payload = payload;
    f.ref = std::move(ref);
    frames_.push_back(std::move(f));
    unacked_bytes_ += h.length;
    return frames_.back();
  }

  std::size_t unwritten() const { return frames_.size() - next_write_; }
  std::size_t unwritten_payload() const {
    std::size_t n = 0;
    for (std::size_t i = next_write_; i < frames_.size(); ++i) n += frames_[i].h.length;
    return n;
  }
  // The i-th frame not yet written whole; sealed with `sent_ns` (the emulated delay's
  // timestamp) when none of it has gone out on this connection yet.
  Frame& unwritten_frame(std::size_t i, std::int64_t sent_ns) {
    Frame& f = frames_[next_write_ + i];
    if (f.put == 0) {
      f.h.sent_ns = sent_ns;
      f.wire = seal(f.h, f.payload_crc);
    }
    return f;
  }
  // `bytes` more went out, from the first unwritten frame on: how many frames that
  // finished, and how many payload bytes among them were resends.
  struct Wrote {
    std::size_t frames = 0, resent = 0;
  };
  Wrote wrote(std::size_t bytes) {
    Wrote w;
    while (bytes > 0) {
      Frame& f = frames_[next_write_];
      const std::size_t take = std::min(bytes, f.wire_bytes() - f.put);
      f.put += take;
      bytes -= take;
      if (f.put < f.wire_bytes()) break;
      if (f.sent) w.resent += f.h.length;
      f.sent = true;
      ++next_write_;
      ++w.frames;
    }
    return w;
  }
  // The sequence number of the last frame written whole (0: none).
  std::uint64_t last_written() const { return next_write_ ? frames_[next_write_ - 1].h.seq : 0; }

  // The last `n` frames written are still being read by a write in progress (an
  // asynchronous one): an ack that covers them retires them only once release() says
  // the write is over, so neither their headers nor their senders' buffers go while it
  // reads them. Only resends need it: after a reconnect the receiver acknowledges, on
  // the new connection, frames it got on the old one while they are written again.
  void pin(std::size_t n) { pinned_ = n; }
  template <class F>
  bool release(F&& retired) {
    pinned_ = 0;
    return ack(acked_, retired);
  }

  // Retires, oldest first, every frame a cumulative ack for `seq` covers: retired(Ref&,
  // payload bytes). After a reconnect the ack may cover frames rewound for resending:
  // the receiver has them, so they are not sent again. False when nothing was retired.
  template <class F>
  bool ack(std::uint64_t seq, F&& retired) {
    acked_ = std::max(acked_, seq);
    bool moved = false;
    while (!frames_.empty() && frames_.front().h.seq <= acked_ && (pinned_ == 0 || next_write_ > pinned_)) {
      Frame& f = frames_.front();
      unacked_bytes_ -= f.h.length;
      retired(f.ref, f.h.length);
      frames_.pop_front();
      if (next_write_ > 0) --next_write_;
      moved = true;
    }
    return moved;
  }
  // The connection broke: everything unacknowledged goes again, from its first byte. The
  // caller releases a write in progress first (closing its socket ends it).
  void rewind() {
    next_write_ = 0;
    for (Frame& f : frames_) f.put = 0;
  }
  // Gives up on every frame (the peer failed): each(Ref&) once per frame.
  template <class F>
  void clear(F&& each) {
    for (Frame& f : frames_) each(f.ref);
    frames_.clear();
    next_write_ = pinned_ = 0;
    unacked_bytes_ = 0;
  }

  bool empty() const { return frames_.empty(); }
  std::size_t frames() const { return frames_.size(); }
  std::size_t unacked_bytes() const { return unacked_bytes_; }

 private:
  std::deque<Frame> frames_;  // in seq order: [0, next_write_) written, the rest not yet
  std::size_t next_write_ = 0;
  std::size_t pinned_ = 0;  // of [0, next_write_), the last ones a write still reads
  std::size_t unacked_bytes_ = 0;
  std::uint64_t next_seq_ = 1;
  std::uint64_t acked_ = 0;  // the highest ack seen
};

// What a sender makes of the 64 bytes that came back on a stream.
struct Reply {
  enum class Kind { ack, goodbye, broken };
  Kind kind = Kind::broken;
  FrameHeader h;    // ack: h.seq; goodbye: h.msg_id (messages sent in all); both: h.sent_ns
  std::string why;  // broken
};
Reply read_reply(const unsigned char* raw);

// The receiving side of one stream.
class InCursor {
 public:
  struct Header {
    enum class Kind { data, resent, goodbye, broken };
    Kind kind = Kind::broken;
    FrameHeader h;
    std::string why;  // broken
  };
  // A data frame's header: `data` to be read and delivered, `resent` to be read and
  // dropped (it arrived before the stream broke), a goodbye, or `broken` with the reason.
  // max_length bounds the payload a frame may announce.
  Header check(const unsigned char* raw, std::uint32_t max_length) const;
  // The payload of frame `h` (data or resent) arrived whole. False on a CRC mismatch, when
  // the stream must break (with `checksum` off only the header's own CRC protects it).
  bool arrived(const FrameHeader& h, std::uint32_t payload_crc, bool checksum);
  // The frame numbered `seq` was delivered (after any emulated delay): an ack is due.
  void delivered(std::uint64_t seq) { delivered_ = std::max(delivered_, seq); }
  bool ack_due() const { return delivered_ > acked_; }
  // The ack to write now, if one is due: cumulative, for everything delivered so far.
  std::optional<EncodedHeader> take_ack(std::int64_t sent_ns);
  // A new connection for the stream: acknowledge again even what was acknowledged on
  // the old one, so the sender retires it instead of resending.
  void rejoined() { acked_ = 0; }

 private:
  std::uint64_t arrived_ = 0;    // last frame whose payload arrived and checked out
  std::uint64_t delivered_ = 0;  // last frame delivered
  std::uint64_t acked_ = 0;      // last frame acknowledged on this connection
};

}  // namespace strata::link
