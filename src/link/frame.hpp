// The WAN link's wire format. Every frame is a fixed 64-byte little-endian header and,
// for data, a payload of `length` bytes (one stripe of a message).
//
//   0 kind u32 | 4 length u32 | 8 seq | 16 msg_id | 24 offset | 32 total | 40 tag |
//   48 sent_ns (i64, steady clock, for delay emulation) | 56 crc u32 | 60 header crc u32
//
// The frame CRC32C covers payload then header (with both crc fields zero): payload first,
// so a sender checksums a stripe once and only re-extends over the header when it
// resends with a new timestamp, and a receiver checksums payload bytes as they arrive.
// The header CRC covers bytes 0..55 alone, so a receiver can trust a header (and place
// the payload straight into a receive buffer) before the payload has arrived.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace strata::link {

inline constexpr std::size_t kHeaderBytes = 64;
using EncodedHeader = std::array<unsigned char, kHeaderBytes>;

enum class FrameKind : std::uint32_t {
  data = 0x444E4157,  // "WAND"
  ack = 0x414E4157,   // "WANA": seq is the cumulative sequence number delivered
  // "WANG": the sender is closing or aborting its transport and will not come back, so
  // the other side stops waiting for it (a broken stream, by contrast, reconnects).
  // msg_id is how many messages the sender sent this receiver in all; nothing follows it
  // on its stream.
  goodbye = 0x474E4157,
};

struct FrameHeader {
  FrameKind kind = FrameKind::data;
  std::uint32_t length = 0;
  std::uint64_t seq = 0;  // per stream, from 1
  std::uint64_t msg_id = 0;  // per sender→receiver pair, from 0
  std::uint64_t offset = 0;
  std::uint64_t total = 0;
  std::uint64_t tag = 0;
  std::int64_t sent_ns = 0;
  std::uint32_t crc = 0;
  bool operator==(const FrameHeader&) const = default;
};

EncodedHeader encode(const FrameHeader& h);
// Throws TransportError naming the problem when the kind is unknown.
FrameHeader decode(const unsigned char* in);

// CRC of a frame given the CRC of its payload; the header's own crc field is ignored.
std::uint32_t frame_crc(std::uint32_t payload_crc, const FrameHeader& h);
// Encodes h with its crc and header crc filled in.
EncodedHeader seal(FrameHeader h, std::uint32_t payload_crc);
// Whether an encoded header's own CRC matches (sealed headers only).
bool header_intact(const unsigned char* in);

}  // namespace strata::link
