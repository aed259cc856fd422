// The striped stream's protocol state (link/stream_core.hpp) on its own: numbering,
// partial writes, cumulative acks, rewinding after a break, and the receiver's header
// checks; then both ends over a simulated connection that breaks at random points,
// where every frame must be delivered exactly once, in order, and every send retired.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "link/crc32c.hpp"
#include "link/frame.hpp"
#include "link/stream_core.hpp"

namespace strata::link {
namespace {

FrameHeader stripe(std::uint64_t msg, std::uint64_t offset, std::uint32_t length, std::uint64_t total) {
  FrameHeader h;
  h.msg_id = msg;
  h.offset = offset;
  h.length = length;
  h.total = total;
  h.tag = 7;
  return h;
}

TEST(OutQueue, NumbersFramesAndCountsPartialWrites) {
  OutQueue<int> q;
  const char payload[100] = {};
  q.push(stripe(0, 0, 100, 100), payload, crc32c(payload, 100), 1);
  q.push(stripe(1, 0, 0, 0), nullptr, 0, 2);
  EXPECT_EQ(q.unwritten(), 2u);
  EXPECT_EQ(q.unacked_bytes(), 100u);
  EXPECT_EQ(q.unwritten_frame(0, 5).h.seq, 1u);
  EXPECT_EQ(q.unwritten_frame(1, 5).h.seq, 2u);
  EXPECT_TRUE(header_intact(q.unwritten_frame(0, 5).wire.data()));
  // Half the first frame, then the rest of it and all of the second.
  EXPECT_EQ(q.wrote(82).frames, 0u);
  EXPECT_EQ(q.unwritten(), 2u);
  const auto w = q.wrote(82 + kHeaderBytes);
  EXPECT_EQ(w.frames, 2u);
  EXPECT_EQ(w.resent, 0u);
  EXPECT_EQ(q.last_written(), 2u);
}

TEST(OutQueue, AcksRetireInOrderAndRewindResends) {
  OutQueue<int> q;
  const char payload[10] = {};
  for (int i = 0; i < 4; ++i) q.push(stripe(static_cast<std::uint64_t>(i), 0, 10, 10), payload, 0, i);
  q.wrote(4 * (kHeaderBytes + 10));
  std::vector<int> retired;
  EXPECT_TRUE(q.ack(2, [&](int r, std::size_t n) {
    retired.push_back(r);
    EXPECT_EQ(n, 10u);
  }));
  EXPECT_EQ(retired, (std::vector<int>{0, 1}));
  EXPECT_FALSE(q.ack(2, [](int, std::size_t) {}));  // nothing new
  q.rewind();
  EXPECT_EQ(q.unwritten(), 2u);
  EXPECT_EQ(q.unwritten_frame(0, 9).h.seq, 3u);
  EXPECT_EQ(q.wrote(2 * (kHeaderBytes + 10)).resent, 20u);
  // An ack after a rewind may cover frames not yet written again: they are retired.
  q.rewind();
  EXPECT_TRUE(q.ack(4, [&](int r, std::size_t) { retired.push_back(r); }));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.unwritten(), 0u);
  EXPECT_EQ(q.unacked_bytes(), 0u);
}

TEST(OutQueue, PinnedFramesWaitForTheirWriteToEnd) {
  OutQueue<int> q;
  const char payload[10] = {};
  for (int i = 0; i < 4; ++i) q.push(stripe(static_cast<std::uint64_t>(i), 0, 10, 10), payload, 0, i);
  q.wrote(2 * (kHeaderBytes + 10));
  q.wrote(2 * (kHeaderBytes + 10));
  q.pin(2);  // frames 3 and 4 are still being written
  std::vector<int> retired;
  auto note = [&](int r, std::size_t) { retired.push_back(r); };
  EXPECT_TRUE(q.ack(4, note));
  EXPECT_EQ(retired, (std::vector<int>{0, 1}));  // the unpinned ones only
  EXPECT_TRUE(q.release(note));  // the write ended: the ack seen meanwhile applies
  EXPECT_EQ(retired, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(q.empty());
}

TEST(OutQueue, ClearHandsBackEveryFrame) {
  OutQueue<int> q;
  for (int i = 0; i < 3; ++i) q.push(stripe(0, 0, 0, 0), nullptr, 0, i);
  int seen = 0;
  q.clear([&](int) { ++seen; });
  EXPECT_EQ(seen, 3);
  EXPECT_TRUE(q.empty());
}

TEST(InCursor, ChecksHeadersAndSequence) {
  InCursor c;
  using Kind = InCursor::Header::Kind;
  FrameHeader h = stripe(0, 0, 8, 8);
  h.seq = 1;
  EncodedHeader e = seal(h, 0);
  EXPECT_EQ(c.check(e.data(), 64).kind, Kind::data);
  EXPECT_EQ(c.check(e.data(), 4).kind, Kind::broken);  // longer than a frame may be
  h.seq = 2;
  e = seal(h, 0);
  const auto gap = c.check(e.data(), 64);
  EXPECT_EQ(gap.kind, Kind::broken);
  EXPECT_NE(gap.why.find("where 1 was due"), std::string::npos);
  h.seq = 1;
  ASSERT_TRUE(c.arrived(h, 0, false));
  e = seal(h, 0);
  EXPECT_EQ(c.check(e.data(), 64).kind, Kind::resent);
  e[3] ^= 1;  // garbled header
  EXPECT_EQ(c.check(e.data(), 64).kind, Kind::broken);
  FrameHeader bad = stripe(0, 6, 8, 8);  // runs past its message
  bad.seq = 2;
  EXPECT_EQ(c.check(seal(bad, 0).data(), 64).kind, Kind::broken);
  FrameHeader bye;
  bye.kind = FrameKind::goodbye;
  EXPECT_EQ(c.check(seal(bye, 0).data(), 64).kind, Kind::goodbye);
}

TEST(InCursor, PayloadCrcAndAcks) {
  InCursor c;
  const char payload[5] = {1, 2, 3, 4, 5};
  FrameHeader h = stripe(0, 0, 5, 5);
  h.seq = 1;
  h.crc = frame_crc(crc32c(payload, 5), h);
  EXPECT_FALSE(c.arrived(h, crc32c(payload, 4), true));
  EXPECT_TRUE(c.arrived(h, crc32c(payload, 5), true));
  EXPECT_FALSE(c.ack_due());
  c.delivered(1);
  ASSERT_TRUE(c.ack_due());
  const auto ack = c.take_ack(3);
  ASSERT_TRUE(ack);
  const Reply r = read_reply(ack->data());
  EXPECT_EQ(r.kind, Reply::Kind::ack);
  EXPECT_EQ(r.h.seq, 1u);
  EXPECT_FALSE(c.take_ack(4));
  c.rejoined();  // a new connection acknowledges again
  EXPECT_TRUE(c.take_ack(5));
  EncodedHeader junk = *ack;
  junk[10] ^= 1;
  EXPECT_EQ(read_reply(junk.data()).kind, Reply::Kind::broken);
}

// Sender and receiver of one stream over a connection that carries whole frames, breaks
// at random (losing what is in flight both ways), and is redialled.
TEST(StreamCore, RandomBreaksLoseNothingAndDuplicateNothing) {
  std::mt19937_64 rng(20261124);
  constexpr int kMessages = 400;
  std::vector<std::vector<char>> payloads(kMessages);
  for (auto& p : payloads) {
    p.resize(rng() % 300);
    for (char& c : p) c = static_cast<char>(rng());
  }
  OutQueue<int> out;
  InCursor in;
  for (int m = 0; m < kMessages; ++m) {
    const auto& p = payloads[static_cast<std::size_t>(m)];
    const auto len = static_cast<std::uint32_t>(p.size());
    out.push(stripe(static_cast<std::uint64_t>(m), 0, len, len), p.data(), crc32c(p.data(), len), m);
  }
  struct Wire {
    EncodedHeader header;
    std::vector<char> payload;
  };
  std::vector<Wire> to_receiver;  // in flight on the current connection
  std::vector<EncodedHeader> to_sender;
  std::vector<int> delivered, retired;
  int breaks = 0, dropped = 0;
  for (int round = 0; round < 100000 && retired.size() < kMessages; ++round) {
    const int action = static_cast<int>(rng() % 10);
    if (action < 4 && out.unwritten() > 0) {  // write a few frames
      const std::size_t n = std::min<std::size_t>(out.unwritten(), 1 + rng() % 4);
      std::size_t bytes = 0;
      for (std::size_t i = 0; i < n; ++i) {
        auto& f = out.unwritten_frame(i, round);
        to_receiver.push_back({f.wire, std::vector<char>(f.payload, f.payload + f.h.length)});
        bytes += f.wire_bytes();
      }
      out.wrote(bytes);
    } else if (action < 7 && !to_receiver.empty()) {  // the receiver reads one frame
      const Wire w = to_receiver.front();
      to_receiver.erase(to_receiver.begin());
      const auto c = in.check(w.header.data(), 1 << 20);
      ASSERT_NE(c.kind, InCursor::Header::Kind::broken) << c.why;
      ASSERT_TRUE(in.arrived(c.h, crc32c(w.payload.data(), w.payload.size()), true));
      if (c.kind == InCursor::Header::Kind::resent) {
        ++dropped;
      } else {
        ASSERT_EQ(w.payload, payloads[c.h.msg_id]);
        delivered.push_back(static_cast<int>(c.h.msg_id));
        in.delivered(c.h.seq);
      }
      if (rng() % 2)
        if (auto a = in.take_ack(round)) to_sender.push_back(*a);
    } else if (action < 9 && !to_sender.empty()) {  // the sender reads an ack
      const Reply r = read_reply(to_sender.front().data());
      to_sender.erase(to_sender.begin());
      ASSERT_EQ(r.kind, Reply::Kind::ack);
      out.ack(r.h.seq, [&](int m, std::size_t) { retired.push_back(m); });
    } else if (action == 9 && rng() % 8 == 0) {  // the connection breaks
      ++breaks;
      // Some of what was in flight still arrives; the rest is lost.
      to_receiver.resize(rng() % (to_receiver.size() + 1));
      to_sender.clear();
      out.rewind();
      in.rejoined();
      if (auto a = in.take_ack(round)) to_sender.push_back(*a);
    }
    if (out.unwritten() == 0 && to_receiver.empty() && to_sender.empty())
      if (auto a = in.take_ack(round)) to_sender.push_back(*a);
  }
  ASSERT_EQ(retired.size(), static_cast<std::size_t>(kMessages));
  std::vector<int> expect(kMessages);
  for (int m = 0; m < kMessages; ++m) expect[static_cast<std::size_t>(m)] = m;
  EXPECT_EQ(delivered, expect);
  EXPECT_EQ(retired, expect);
  EXPECT_GT(breaks, 5);
  EXPECT_GT(dropped, 0);
}

}  // namespace
}  // namespace strata::link
