// One inbound stream's frames, parsed from bytes its owner reads however it likes: the
// WAN link copies them out of a buffer that Asio fills (or reads a large payload straight
// into a receive buffer), the NCCL plugin reads each piece with a non-blocking recv. Both
// run the same loop, read_frames() below, and keep only what is theirs: where a payload
// goes, when a message can be matched, what a broken stream means.
//
// A frame goes header → decide → payload → (checked) → header. In `decide` the owner
// looks at the checked header and takes the payload, drops it (a resend of a frame that
// already arrived), or holds the stream there until it can take it (no receive posted,
// no staging room): the header stays parsed, and the next read_frames() asks again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "link/crc32c.hpp"
#include "link/frame.hpp"
#include "link/stream_core.hpp"

namespace strata::link {

class FrameReader {
 public:
  enum class State { header, decide, payload };

  // max_length bounds the payload one frame may announce; checksum off: only the header's
  // own CRC is checked (the payload's is not computed).
  explicit FrameReader(std::uint32_t max_length = std::numeric_limits<std::uint32_t>::max(), bool checksum = true)
      : max_length_(max_length), checksum_(checksum) {}

  State state() const { return state_; }
  // Acknowledgements and rejoins go through the cursor, which this reader feeds.
  InCursor& cursor() { return cursor_; }

  // header: where the rest of the header goes.
  std::span<unsigned char> header_space() { return {raw_.data() + got_, kHeaderBytes - got_}; }
  bool header_partial() const { return state_ == State::header && got_ > 0; }
  // n bytes were put into header_space(); a whole header is checked and waits in decide.
  void header_read(std::size_t n);

  // decide (and payload): the checked header.
  const InCursor::Header& header() const { return header_; }
  void take() { start_payload(false); }
  void drop() { start_payload(true); }

  // payload
  bool dropping() const { return dropping_; }
  std::size_t payload_done() const { return done_; }
  std::size_t payload_left() const { return header_.h.length - done_; }
  // n more payload bytes, at p wherever the owner put them.
  void payload_read(const void* p, std::size_t n) {
    if (checksum_) crc_ = crc32c_extend(crc_, p, n);
    done_ += n;
  }
  // The payload is whole: false when its CRC says the stream must break. Either way the
  // next bytes are a header.
  bool finish();

  // The connection ended: a frame in progress is forgotten (its sender sends it again).
  void reset() {
    state_ = State::header;
    got_ = done_ = 0;
    dropping_ = false;
  }

 private:
  void start_payload(bool drop) {
    state_ = State::payload;
    dropping_ = drop;
    done_ = 0;
    crc_ = 0;
  }

  std::uint32_t max_length_;
  bool checksum_;
  InCursor cursor_;
  State state_ = State::header;
  EncodedHeader raw_{};
  std::size_t got_ = 0;  // header bytes so far
  InCursor::Header header_;
  bool dropping_ = false;
  std::size_t done_ = 0;  // payload bytes so far
  std::uint32_t crc_ = 0;
};

// What the owner says of a header in `decide`.
enum class Verdict { take, drop, hold, stop };

// Why read_frames() returned, and whether it moved anything on the way.
struct Pumped {
  enum class Why { need_bytes, held, stopped };
  Why why = Why::need_bytes;
  bool moved = false;
};

// Parses frames until the owner has no bytes for now, holds the stream, or stops it.
// Io, the stream's owner, provides:
//   std::size_t read(unsigned char* into, std::size_t max, bool* stop)
//       up to max header bytes into `into`; 0: none for now. *stop: the owner ended the
//       stream (closed, failed, broken); it has handled that, the loop just returns.
//   std::span<const unsigned char> read_payload(std::size_t max, bool* stop)
//       up to max payload bytes of the frame (the reader's header() and payload_done()
//       say which), put where the owner wants them and returned where they lie (a dropped
//       payload may be left where it was read); empty: none for now.
//   Verdict on_header(const InCursor::Header&)  (the kinds: data, resent, goodbye, broken)
//   bool on_frame(const FrameHeader&, bool dropped)   the payload arrived whole and
//       checked; false stops.
//   void on_broken(const std::string& why)   the payload failed its CRC.
template <class Io>
Pumped read_frames(FrameReader& r, Io& io) {
  Pumped out;
  bool stop = false;
  for (;;) {
    switch (r.state()) {
      case FrameReader::State::header: {
        const auto space = r.header_space();
        const std::size_t n = io.read(space.data(), space.size(), &stop);
        if (stop) return {Pumped::Why::stopped, true};
        if (n == 0) return out;
        out.moved = true;
        r.header_read(n);
        break;
      }
      case FrameReader::State::decide:
        switch (io.on_header(r.header())) {
          case Verdict::take: r.take(); break;
          case Verdict::drop: r.drop(); break;
          case Verdict::hold: out.why = Pumped::Why::held; return out;
          case Verdict::stop: return {Pumped::Why::stopped, true};
        }
        break;
      case FrameReader::State::payload: {
        if (r.payload_left() > 0) {
          const auto got = io.read_payload(r.payload_left(), &stop);
          if (stop) return {Pumped::Why::stopped, true};
          if (got.empty()) return out;
          out.moved = true;
          r.payload_read(got.data(), got.size());
          if (r.payload_left() > 0) break;
        }
        const FrameHeader h = r.header().h;
        const bool dropped = r.dropping();
        out.moved = true;
        if (!r.finish()) {
          io.on_broken("frame CRC mismatch (message " + std::to_string(h.msg_id) + ", offset " +
                       std::to_string(h.offset) + ")");
          return {Pumped::Why::stopped, true};
        }
        if (!io.on_frame(h, dropped)) return {Pumped::Why::stopped, true};
        break;
      }
    }
  }
}

}  // namespace strata::link
