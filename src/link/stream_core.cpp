#include "link/stream_core.hpp"

#include <algorithm>
#include <exception>

namespace strata::link {

Reply read_reply(const unsigned char* raw) {
  Reply r;
  try {
    r.h = decode(raw);
  } catch (const std::exception& e) {
    r.why = e.what();
    return r;
  }
  if (!header_intact(raw)) {
    r.why = "acknowledgement with a bad header CRC";
  } else if (r.h.kind == FrameKind::goodbye) {
    r.kind = Reply::Kind::goodbye;
  } else if (r.h.kind != FrameKind::ack || frame_crc(0, r.h) != r.h.crc) {
    r.why = "corrupt acknowledgement";
  } else {
    r.kind = Reply::Kind::ack;
  }
  return r;
}

InCursor::Header InCursor::check(const unsigned char* raw, std::uint32_t max_length) const {
  Header out;
  try {
    out.h = decode(raw);
  } catch (const std::exception& e) {
    out.why = e.what();
    return out;
  }
  const FrameHeader& h = out.h;
  if (!header_intact(raw)) {
    out.why = "frame header CRC mismatch";
  } else if (h.kind == FrameKind::goodbye) {
    out.kind = Header::Kind::goodbye;
  } else if (h.kind != FrameKind::data) {
    out.why = "unexpected frame kind on a data stream";
  } else if (h.length > max_length || h.total > kMaxMessageBytes || h.offset > h.total ||
             h.length > h.total - h.offset) {
    out.why = "frame outside its message (offset " + std::to_string(h.offset) + ", length " +
              std::to_string(h.length) + ", total " + std::to_string(h.total) + ")";
  } else if (h.seq <= arrived_) {
    out.kind = Header::Kind::resent;
  } else if (h.seq != arrived_ + 1) {
    out.why = "frame " + std::to_string(h.seq) + " where " + std::to_string(arrived_ + 1) + " was due";
  } else {
    out.kind = Header::Kind::data;
  }
  return out;
}

bool InCursor::arrived(const FrameHeader& h, std::uint32_t payload_crc, bool checksum) {
  if (checksum && frame_crc(payload_crc, h) != h.crc) return false;
  arrived_ = std::max(arrived_, h.seq);  // a resend's check moves nothing
  return true;
}

std::optional<EncodedHeader> InCursor::take_ack(std::int64_t sent_ns) {
  if (delivered_ <= acked_) return std::nullopt;
  FrameHeader h;
  h.kind = FrameKind::ack;
  h.seq = delivered_;
  h.sent_ns = sent_ns;
  acked_ = delivered_;
  return seal(h, 0);
}

}  // namespace strata::link
