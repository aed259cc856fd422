#include "link/frame.hpp"

#include <bit>
#include <cstring>

#include "strata/errors.hpp"
#include "link/crc32c.hpp"

namespace strata::link {

static_assert(std::endian::native == std::endian::little,
              "the WAN frame layout is written with memcpy on a little-endian host");

namespace {
template <class T>
void put(unsigned char* out, std::size_t at, T v) {
  std::memcpy(out + at, &v, sizeof v);
}
template <class T>
T take(const unsigned char* in, std::size_t at) {
  T v;
  std::memcpy(&v, in + at, sizeof v);
  return v;
}
}  // namespace

EncodedHeader encode(const FrameHeader& h) {
  EncodedHeader out{};
  put(out.data(), 0, static_cast<std::uint32_t>(h.kind));
  put(out.data(), 4, h.length);
  put(out.data(), 8, h.seq);
  put(out.data(), 16, h.msg_id);
  put(out.data(), 24, h.offset);
  put(out.data(), 32, h.total);
  put(out.data(), 40, h.tag);
  put(out.data(), 48, h.sent_ns);
  put(out.data(), 56, h.crc);
  return out;
}

FrameHeader decode(const unsigned char* in) {
  FrameHeader h;
  const auto kind = take<std::uint32_t>(in, 0);
  if (kind != static_cast<std::uint32_t>(FrameKind::data) &&
      kind != static_cast<std::uint32_t>(FrameKind::ack) &&
      kind != static_cast<std::uint32_t>(FrameKind::goodbye))
    throw TransportError("wan frame: unknown kind " + std::to_string(kind));
  h.kind = static_cast<FrameKind>(kind);
  h.length = take<std::uint32_t>(in, 4);
  h.seq = take<std::uint64_t>(in, 8);
  h.msg_id = take<std::uint64_t>(in, 16);
  h.offset = take<std::uint64_t>(in, 24);
  h.total = take<std::uint64_t>(in, 32);
  h.tag = take<std::uint64_t>(in, 40);
  h.sent_ns = take<std::int64_t>(in, 48);
  h.crc = take<std::uint32_t>(in, 56);
  return h;
}

std::uint32_t frame_crc(std::uint32_t payload_crc, const FrameHeader& h) {
  FrameHeader zero = h;
  zero.crc = 0;
  const EncodedHeader bytes = encode(zero);
  return crc32c_extend(payload_crc, bytes.data(), bytes.size());
}

EncodedHeader seal(FrameHeader h, std::uint32_t payload_crc) {
  h.crc = frame_crc(payload_crc, h);
  EncodedHeader out = encode(h);
  put(out.data(), 60, crc32c(out.data(), 56));
  return out;
}

bool header_intact(const unsigned char* in) {
  return take<std::uint32_t>(in, 60) == crc32c(in, 56);
}

}  // namespace strata::link
