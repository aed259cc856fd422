// The frame reader that the WAN link and the NCCL plugin share: frames come out whole
// however the bytes are cut, a held header is asked about again, resends are dropped,
// a damaged payload breaks the stream, and a reset forgets a frame in progress.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "link/crc32c.hpp"
#include "link/frame_reader.hpp"

namespace strata::link {
namespace {

using Bytes = std::vector<unsigned char>;

// Frame `seq` of message msg_id: its whole payload in one stripe.
Bytes frame(std::uint64_t seq, std::uint64_t msg_id, const std::string& payload) {
  FrameHeader h;
  h.seq = seq;
  h.msg_id = msg_id;
  h.total = h.length = static_cast<std::uint32_t>(payload.size());
  h.tag = 7;
  const EncodedHeader e = seal(h, crc32c(payload.data(), payload.size()));
  Bytes out(kHeaderBytes + payload.size());
  std::memcpy(out.data(), e.data(), kHeaderBytes);
  if (!payload.empty()) std::memcpy(out.data() + kHeaderBytes, payload.data(), payload.size());
  return out;
}

// Feeds the reader from a byte string, at most `cut` bytes a read, and records what it
// made of them; `hold` headers are held once each before they are taken.
struct Io {
  Bytes in;
  std::size_t pos = 0, cut = 1 << 20;
  std::vector<std::string> delivered;
  std::vector<std::uint64_t> dropped;
  std::string broken;
  int holds_left = 0;
  std::string dest;  // the current frame's payload

  std::size_t take(std::size_t max) { return std::min({max, cut, in.size() - pos}); }
  std::size_t read(unsigned char* into, std::size_t max, bool*) {
    const std::size_t n = take(max);
    std::memcpy(into, in.data() + pos, n);
    pos += n;
    return n;
  }
  std::span<const unsigned char> read_payload(std::size_t max, bool*) {
    const std::size_t n = take(max);
    const unsigned char* p = in.data() + pos;
    pos += n;
    dest.append(reinterpret_cast<const char*>(p), n);
    return {p, n};
  }
  Verdict on_header(const InCursor::Header& h) {
    dest.clear();
    if (h.kind == InCursor::Header::Kind::broken) {
      broken = h.why;
      return Verdict::stop;
    }
    if (h.kind == InCursor::Header::Kind::resent) return Verdict::drop;
    if (holds_left > 0) {
      --holds_left;
      return Verdict::hold;
    }
    return Verdict::take;
  }
  bool on_frame(const FrameHeader& h, bool drop) {
    if (drop) dropped.push_back(h.seq);
    else delivered.push_back(dest);
    return true;
  }
  void on_broken(const std::string& why) { broken = why; }
};

Bytes stream_of(const std::vector<std::string>& payloads) {
  Bytes all;
  std::uint64_t seq = 1;
  for (const std::string& p : payloads) {
    const Bytes f = frame(seq, seq - 1, p);
    all.insert(all.end(), f.begin(), f.end());
    ++seq;
  }
  return all;
}

TEST(FrameReader, FramesComeOutWholeHoweverTheBytesAreCut) {
  std::vector<std::string> payloads{"", "a", std::string(1000, 'x'), "odd-length!", std::string(70000, 'q')};
  for (std::size_t cut : {std::size_t{1}, std::size_t{7}, std::size_t{63}, std::size_t{64}, std::size_t{4096}}) {
    Io io;
    io.in = stream_of(payloads);
    io.cut = cut;
    FrameReader r;
    // Every read returns at most `cut` bytes, so headers and payloads arrive in pieces.
    EXPECT_EQ(read_frames(r, io).why, Pumped::Why::need_bytes);
    EXPECT_EQ(io.pos, io.in.size());
    EXPECT_EQ(io.delivered, payloads) << "cut " << cut;
    EXPECT_TRUE(io.broken.empty()) << io.broken;
    EXPECT_EQ(r.state(), FrameReader::State::header);
  }
}

TEST(FrameReader, AHeldHeaderIsAskedAgainAndNotReparsed) {
  Io io;
  io.in = stream_of({"first", "second"});
  io.holds_left = 1;
  FrameReader r;
  const Pumped held = read_frames(r, io);
  EXPECT_EQ(held.why, Pumped::Why::held);
  EXPECT_TRUE(io.delivered.empty());
  EXPECT_EQ(r.state(), FrameReader::State::decide);
  EXPECT_EQ(io.pos, kHeaderBytes);  // no payload read while held
  const Pumped p = read_frames(r, io);
  EXPECT_EQ(p.why, Pumped::Why::need_bytes);
  EXPECT_EQ(io.delivered, (std::vector<std::string>{"first", "second"}));
}

TEST(FrameReader, ResentFramesAreDroppedAndADamagedPayloadBreaks) {
  Io io;
  Bytes all = stream_of({"one", "two"});
  const Bytes again = frame(1, 0, "one");  // a resend after a reconnect
  all.insert(all.end(), again.begin(), again.end());
  io.in = all;
  FrameReader r;
  read_frames(r, io);
  EXPECT_EQ(io.delivered, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(io.dropped, (std::vector<std::uint64_t>{1}));

  Io bad;
  bad.in = frame(1, 0, "payload");
  bad.in.back() ^= 1;
  FrameReader r2;
  const Pumped p = read_frames(r2, bad);
  EXPECT_EQ(p.why, Pumped::Why::stopped);
  EXPECT_NE(bad.broken.find("CRC mismatch"), std::string::npos) << bad.broken;
  EXPECT_TRUE(bad.delivered.empty());
}

TEST(FrameReader, OutOfOrderFramesBreakAndResetForgetsAHalfFrame) {
  Io io;
  io.in = frame(2, 0, "skipped one");
  FrameReader r;
  EXPECT_EQ(read_frames(r, io).why, Pumped::Why::stopped);
  EXPECT_NE(io.broken.find("where 1 was due"), std::string::npos) << io.broken;

  // Half a frame, then the connection ends: after reset the whole frame comes again.
  Io half;
  const Bytes f = frame(1, 0, "whole at last");
  half.in.assign(f.begin(), f.begin() + 70);
  FrameReader r2;
  read_frames(r2, half);
  EXPECT_EQ(r2.state(), FrameReader::State::payload);
  r2.reset();
  r2.cursor().rejoined();
  half.in = f;
  half.pos = 0;
  read_frames(r2, half);
  EXPECT_EQ(half.delivered, (std::vector<std::string>{"whole at last"}));
}

TEST(FrameReader, WithoutChecksumsOnlyTheHeaderIsChecked) {
  Io io;
  io.in = frame(1, 0, "payload");
  io.in.back() ^= 1;
  FrameReader r(1 << 20, false);
  EXPECT_EQ(read_frames(r, io).why, Pumped::Why::need_bytes);
  ASSERT_EQ(io.delivered.size(), 1u);
  EXPECT_TRUE(io.broken.empty());
  // A header that announces more than the reader's bound breaks the stream.
  Io big;
  big.in = frame(1, 0, std::string(100, 'z'));
  FrameReader small(64);
  EXPECT_EQ(read_frames(small, big).why, Pumped::Why::stopped);
  EXPECT_NE(big.broken.find("outside its message"), std::string::npos) << big.broken;
}

}  // namespace
}  // namespace strata::link
