// The striped link's wire format: CRC32C, frame encoding and the stripe scheduler.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/errors.hpp"
#include "link/crc32c.hpp"
#include "link/frame.hpp"
#include "link/striping.hpp"

namespace strata::link {
namespace {

using namespace std::chrono_literals;

TEST(Crc32c, KnownVectors) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c_extend_portable(0, check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  // RFC 3720 (iSCSI) B.4 vectors: 32 zero bytes, 32 0xFF bytes, 0..31 ascending.
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc.data(), inc.size()), 0x46DD794Eu);
}

TEST(Crc32c, ExtendEqualsWholeAndPathsAgree) {
  std::vector<unsigned char> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 31 + 7);
  const std::uint32_t whole = crc32c(data.data(), data.size());
  for (std::size_t cut : {0u, 1u, 7u, 8u, 513u, 1000u}) {
    const std::uint32_t first = crc32c(data.data(), cut);
    EXPECT_EQ(crc32c_extend(first, data.data() + cut, data.size() - cut), whole) << cut;
  }
  // Odd lengths and offsets exercise the hardware path's byte tail and unaligned loads.
  for (std::size_t off = 0; off < 9; ++off)
    EXPECT_EQ(crc32c(data.data() + off, 101 + off),
              crc32c_extend_portable(0, data.data() + off, 101 + off));
}

TEST(Frame, EncodeDecodeRoundTrip) {
  FrameHeader h;
  h.kind = FrameKind::data;
  h.length = 524288;
  h.seq = 0x0102030405060708ull;
  h.msg_id = 42;
  h.offset = 3u << 20;
  h.total = (1ull << 40) - 1;
  h.tag = (1ull << 40) - 3;
  h.sent_ns = -123456789;
  h.crc = 0xDEADBEEF;
  const EncodedHeader bytes = encode(h);
  EXPECT_EQ(decode(bytes.data()), h);
  EXPECT_EQ(bytes[60] | bytes[61] | bytes[62] | bytes[63], 0);
}

TEST(Frame, SealedCrcCoversHeaderAndPayload) {
  const std::string payload = "stripe bytes";
  FrameHeader h;
  h.length = static_cast<std::uint32_t>(payload.size());
  h.total = payload.size();
  h.seq = 1;
  const std::uint32_t pcrc = crc32c(payload.data(), payload.size());
  const FrameHeader sealed = decode(seal(h, pcrc).data());
  EXPECT_EQ(frame_crc(pcrc, sealed), sealed.crc);
  FrameHeader other = sealed;
  other.offset = 1;  // any header change shows
  EXPECT_NE(frame_crc(pcrc, other), sealed.crc);
  const std::string flipped = "stripe bytez";
  EXPECT_NE(frame_crc(crc32c(flipped.data(), flipped.size()), sealed), sealed.crc);
}

TEST(Frame, HeaderCrcCatchesAnyHeaderBitFlip) {
  FrameHeader h;
  h.length = 10;
  h.total = 100;
  h.tag = 77;
  const EncodedHeader good = seal(h, 0x1234);
  EXPECT_TRUE(header_intact(good.data()));
  for (std::size_t bit = 0; bit < 56 * 8; ++bit) {
    EncodedHeader bad = good;
    bad[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    EXPECT_FALSE(header_intact(bad.data())) << "bit " << bit;
  }
}

TEST(Frame, UnknownKindIsRejected) {
  EncodedHeader bytes = encode(FrameHeader{});
  bytes[0] ^= 0xFF;
  EXPECT_THROW(decode(bytes.data()), TransportError);
}

TEST(Striping, PicksTheLeastLoadedReadyStream) {
  const std::size_t kWin = 1000;
  std::vector<StreamLoad> s = {{true, 300}, {true, 100}, {true, 200}, {false, 0}};
  EXPECT_EQ(pick_stream(s, 100, kWin), 1);  // stream 3 is idle but not ready
  s[1].ready = false;
  EXPECT_EQ(pick_stream(s, 100, kWin), 2);
  s[2].unacked = 950;  // would exceed its window
  EXPECT_EQ(pick_stream(s, 100, kWin), 0);
  s[0].unacked = 950;
  EXPECT_EQ(pick_stream(s, 100, kWin), -1);
  // An idle stream takes a stripe larger than the window, alone.
  s[3] = {true, 0};
  EXPECT_EQ(pick_stream(s, 5000, kWin), 3);
  EXPECT_EQ(pick_stream(std::vector<StreamLoad>{}, 1, kWin), -1);
}

TEST(Striping, BulkWidthNarrowsOnAFastPathAndWidensOnASlowOne) {
  constexpr double kAbove = 250e6 / 8;  // bytes/s
  // Two of four carrying 300 Mbit/s stay two; under 125 Mbit/s they take all four.
  EXPECT_EQ(next_bulk_width(2, 4, 2, kAbove, 300e6 / 8), 2u);
  EXPECT_EQ(next_bulk_width(2, 4, 2, kAbove, 130e6 / 8), 2u);  // between the thresholds: kept
  EXPECT_EQ(next_bulk_width(2, 4, 2, kAbove, 120e6 / 8), 4u);
  // Four carrying 250 Mbit/s go back to two; less, and they stay four.
  EXPECT_EQ(next_bulk_width(4, 4, 2, kAbove, 250e6 / 8), 2u);
  EXPECT_EQ(next_bulk_width(4, 4, 2, kAbove, 200e6 / 8), 4u);
  EXPECT_EQ(next_bulk_width(4, 4, 2, kAbove, 100e6 / 8), 4u);
  // No narrowing asked for, or nothing to narrow: every stream.
  EXPECT_EQ(next_bulk_width(2, 4, 0, kAbove, 900e6 / 8), 4u);
  EXPECT_EQ(next_bulk_width(2, 2, 2, kAbove, 900e6 / 8), 2u);
  EXPECT_EQ(next_bulk_width(1, 2, 3, kAbove, 10e6 / 8), 2u);
}

TEST(Striping, SlowStreamGetsFewerStripes) {
  // Stream 0 acknowledges everything at once, stream 1 never: stream 1 fills its window
  // and every further stripe goes to stream 0.
  std::vector<StreamLoad> s = {{true, 0}, {true, 0}};
  int counts[2] = {0, 0};
  for (int i = 0; i < 20; ++i) {
    const int k = pick_stream(s, 100, 400);
    ASSERT_GE(k, 0);
    ++counts[k];
    s[static_cast<std::size_t>(k)].unacked += 100;
    s[0].unacked = 0;
  }
  EXPECT_LE(counts[1], 4);
  EXPECT_GE(counts[0], 16);
}

}  // namespace
}  // namespace strata::link
