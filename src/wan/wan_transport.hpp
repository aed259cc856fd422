// The inter-region link: a Transport over K parallel TCP streams per peer pair.
//
// Each rank sends on streams it opened and receives on streams it accepted; the receiver
// writes cumulative acks back on the stream a frame came in on. Two lanes of streams: the
// bulk lane's K, and a few latency streams of their own for small messages (options'
// latency_streams, under CUBIC), so a small call neither queues behind bulk stripes nor
// is paced by a BBR that has only seen small messages. Messages are cut into stripes
// handed to the least-loaded stream of their lane (striping.hpp); every frame carries a
// per-stream sequence number and a CRC32C (frame.hpp). A sender keeps each frame until
// it is acknowledged, so when a stream breaks (error, EOF, CRC mismatch, emulated loss)
// it reconnects that stream with exponential backoff and resends; the receiver drops
// what it already has by sequence number. A send completes as soon as the link owns its
// bytes: it copies them (up to options().send_buffer per peer) and keeps the copy until
// every stripe is acknowledged, so a collective waits for its receives, not for a round
// trip behind its last send. Sends up to 64 KiB are always copied, larger ones where the
// measured round trip costs more than the copy; the rest complete once acknowledged.
// Closing waits (boundedly) for the copies still unacknowledged. Receivers reassemble by (message id, offset) and match messages to
// receives in message-id order per peer, which keeps the seam's FIFO per (source, tag).
//
// A rank that closes says goodbye on its idle streams, naming how many messages it sent
// each peer. A goodbye is a frame like any other: it takes effect in its stream's order
// (behind data and acks still held by the emulated delay), and a peer gives up on what is
// outstanding only once nothing more can come: receives when no message left to match can
// satisfy them or every stream has closed with nothing held, sends once every stream has
// said goodbye or closed with no acknowledgement held.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "bootstrap/auth_gate.hpp"
#include "bootstrap/store.hpp"
#include "base/asio.hpp"
#include "transport/asio_transport.hpp"
#include "transport/delivery.hpp"
#include "transport/buffer_pool.hpp"
#include "transport/copy_request.hpp"
#include "transport/tag_queues.hpp"
#include "transport/transport.hpp"
#include "wan/emulation.hpp"
#include "link/frame.hpp"
#include "link/frame_reader.hpp"
#include "link/stream_core.hpp"
#include "wan/wan_options.hpp"
#include "wan/wan_socket.hpp"
#include "wan/tls.hpp"

namespace strata::wan {

using transport::Clock;
using transport::RequestPtr;
using transport::Tag;

// A send also carries its progress through the stripes and, once completed early, the
// link's copy of its bytes.
class WanRequest : public transport::CopyRequest {
 public:
  using CopyRequest::CopyRequest;

  // Sends: where the stripes are read from, the link's own copy if it took one.
  const char* source() const { return owned.data ? owned.data.get() : static_cast<const char*>(buf); }

  std::size_t stripes_left = 0;  // sends: stripes not yet acknowledged
  std::size_t stripe = 0;        // sends: the length of its stripes (the last may be shorter)
  transport::BufferPool::Buffer owned;  // sends completed early: the bytes, until acknowledged
  bool early = false;  // completed before its acknowledgement (zero bytes need no copy)
};

class WanTransport : public transport::AsioTransport {
 public:
  WanTransport(int rank, int size, const std::string& bind_host, WanOptions options);
  ~WanTransport() override;

  const char* name() const override { return "wan"; }
  int size() const override { return static_cast<int>(out_.size()); }
  RequestPtr isend(int peer, Tag tag, const void* buf, std::size_t bytes) override;
  RequestPtr irecv(int peer, Tag tag, void* buf, std::size_t capacity) override;
  bool probe(int peer, Tag tag) override { return in_.at(static_cast<std::size_t>(peer)).unexpected.contains(tag); }
  bool progress() override;
  void wait_event(std::chrono::microseconds max) override;
  void abort(const std::string& why) override;
  bool settled() const override { return early_total_.load(std::memory_order_relaxed) == 0; }

  const WanOptions& options() const { return opt_; }
  // Streams broken and reopened so far (sender side), for tests and logs.
  std::uint64_t reconnects() const { return reconnects_; }
  // Frames written on each stream to `peer` so far, bulk lane first (as reconnects()).
  std::vector<std::uint64_t> frames_written(int peer) const;
  transport::TrafficCounters traffic() const override;
  transport::PathFigures path() const override;

 private:
  using Socket = WanSocket;
  using SocketPtr = std::shared_ptr<Socket>;
  using ReqPtr = std::shared_ptr<WanRequest>;

  // ---- sending (wan_sender.cpp)
  // An ack (or the goodbye behind it) held back by the emulated delay.
  struct HeldAck {
    Clock::time_point due;
    std::uint64_t seq = 0;
    bool goodbye = false;
    std::uint64_t sent_msgs = 0;  // goodbye: messages the peer sent us in all
  };
  struct OutStream {
    SocketPtr sock;
    bool connected = false, writing = false;
    link::OutQueue<ReqPtr> q;
    std::uint64_t frames_written = 0;
    link::EncodedHeader ack_in{};
    std::deque<HeldAck> delayed_acks;  // emulated delay, in arrival order
    // Backoff state: `down` from the first break until an ack shows the stream moving again,
    // so a peer that accepts and then drops every connection still runs out of time.
    int failures = 0;
    Clock::time_point retry_at{}, down_since{};
    bool down = false;
    std::string last_error;  // why it last broke, for the error once it cannot be restored
    // The peer said goodbye on this stream, or it closed after a goodbye on another:
    // no acknowledgement can come on it any more, and it is not reconnected.
    bool farewell = false;
    // Round-trip sample in flight: the last frame of a write, and when it went.
    std::uint64_t probe_seq = 0;
    Clock::time_point probe_sent{};
    // Its kernel's view (wan_path.cpp): the best delivery rate lately, and when.
    double rate = 0;
    Clock::time_point rate_at{};
    std::uint64_t segs = 0, retrans = 0;
    double srtt_s = 0, min_rtt_s = 0;
    // Time it had bytes in flight: in all, and when its peer's bulk width last changed.
    std::uint64_t busy_us = 0, busy_at_width = 0;
  };
  struct PendingSend {
    ReqPtr req;
    std::uint64_t msg_id = 0;
    std::size_t next_offset = 0;
  };
  struct Outbound {
    std::vector<OutStream> streams;  // the bulk lane's, then the latency lane's
    std::array<std::deque<PendingSend>, 2> pending;  // by lane (kBulk, kLatency), each in id order
    std::uint64_t next_msg_id = 0;
    std::string failed;
    bool departing = false;  // the peer said goodbye: broken streams are not reconnected
    TokenBucket bucket;
    Clock::time_point rate_ready{};
    bool cut_done = false;
    std::size_t owned_bytes = 0;  // copies of completed sends not yet acknowledged
    std::size_t early_sends = 0;  // sends completed before their acknowledgement, still unacknowledged
    // The shortest time yet from writing a frame to its acknowledgement (0: no sample
    // yet): the path's round trip without the queue of this rank's own bytes, which is
    // what a send that waits for its acknowledgement pays beyond its bytes.
    std::chrono::nanoseconds min_rtt{0};
    // How many of the bulk streams this peer's stripes go to (0: all), chosen from the
    // rate they carry (choose_bulk_width).
    std::size_t bulk_width = 0;

    bool has_pending() const { return !pending[0].empty() || !pending[1].empty(); }
    void fail_pending(const std::string& why) {
      for (auto& lane : pending) {
        for (auto& p : lane) p.req->fail(why);
        lane.clear();
      }
    }
  };

  // ---- the path (wan_path.cpp)
  // Reads its busy streams' TCP_INFO every kSampleEvery and publishes what path() tells.
  void sample_paths(Clock::time_point now);
  transport::PathFigures compute_path() const;
  // Narrows a peer's bulk lane to options().narrow_streams while it carries
  // options().narrow_above, widens it again below half of that.
  void choose_bulk_width(int peer, Outbound& o, Clock::time_point now);
  // Sets a stream's TCP up (net::tune_path), a latency stream's with its own congestion
  // control, telling once what the kernel refused.
  void tune(int fd, bool latency = false);

  // ---- receiving (wan_receiver.cpp)
  static constexpr std::uint32_t kMaxStripe = 64u << 20;  // the longest frame a peer may announce
  struct InMsg {
    std::uint64_t id = 0;
    Tag tag = 0;
    std::size_t total = 0, received = 0;
    char* dest = nullptr;  // user buffer, staging, or null when the payload is dropped
    transport::BufferPool::Buffer staging;
    bool budgeted = false;  // staging counted against options().unexpected_bytes
    ReqPtr req;  // the receive it was matched to, if any
    bool matched = false, complete = false;
  };
  using InMsgPtr = std::shared_ptr<InMsg>;
  // A frame held back by the emulated delay: a stripe of msg, or the peer's goodbye.
  struct Arrival {
    Clock::time_point due;
    std::uint64_t seq = 0;
    InMsgPtr msg;
    std::size_t len = 0;
    bool goodbye = false;
    std::uint64_t sent_msgs = 0;
  };
  struct InStream {
    SocketPtr sock;
    std::vector<unsigned char> rbuf;
    std::size_t rpos = 0, rend = 0;
    link::FrameReader reader{kMaxStripe};
    bool stalled = false;  // the reader holds a header whose message waits for a receive or staging room
    InMsgPtr msg;          // the message the current frame belongs to, unless dropped
    bool ack_writing = false;
    link::EncodedHeader ack_out{};
    std::deque<Arrival> delayed;
  };
  struct Inbound {
    std::vector<InStream> streams;
    std::map<std::uint64_t, InMsgPtr> msgs;  // known and not both matched and complete
    std::uint64_t next_match = 0;
    transport::TagQueues<ReqPtr> posted;
    transport::TagQueues<InMsgPtr> unexpected;
    // The peer said goodbye, having sent us `sent_msgs` messages; `gone` once every
    // stream has closed with nothing held, so no further byte can arrive.
    bool departing = false, gone = false;
    std::uint64_t sent_msgs = 0;
  };

  // sender
  void service_outbound(int peer, Clock::time_point now);
  void schedule(int peer);
  void connect(int peer, int s);
  void write(int peer, int s);
  void read_ack(int peer, int s);
  void apply_ack(int peer, int s, std::uint64_t seq);
  // A frame of `req` acknowledged: with its last one the send completes (if it had not)
  // and the link's copy goes.
  void retire(const ReqPtr& req);
  // Whether isend copies `bytes` for `peer` and completes at once: the copy must fit the
  // peer's send buffer and cost less than the round trip it saves.
  bool worth_owning(const Outbound& o, std::size_t bytes) const;
  // The streams a message of `bytes` travels on, [begin, end) of Outbound::streams: the
  // latency lane up to options().latency_bytes(), the bulk lane beyond (its first
  // Outbound::bulk_width streams).
  static constexpr std::size_t kBulk = 0, kLatency = 1;
  struct Lane {
    std::size_t begin = 0, end = 0;
  };
  Lane lane(const Outbound& o, std::size_t index) const;
  std::size_t lane_of(std::size_t bytes) const {
    return opt_.latency_streams > 0 && bytes <= opt_.latency_bytes() ? kLatency : kBulk;
  }
  std::size_t lane_of_stream(std::size_t s) const { return s < static_cast<std::size_t>(opt_.streams) ? kBulk : kLatency; }
  // The stripe length of a message of `bytes`: up to 256 KiB spread over every stream of
  // its lane (at least 4 KiB a stripe), larger ones in options().stripe_bytes.
  std::size_t stripe_of(const Outbound& o, std::size_t bytes) const;
  // Before closing: waits, at most `limit`, until every frame written (a completed send's
  // copy or not) is acknowledged, giving up on a peer whose streams break or who left.
  void drain_owned(std::chrono::milliseconds limit);
  void break_outbound(int peer, int s, const std::string& why);
  void break_idle_outbound(int peer);
  void fail_peer(int peer, const std::string& why);
  // receiver
  void accept();
  void read_hello(SocketPtr sock);
  void pump(int peer, int s);
  struct FrameIo;  // how pump() feeds the stream's reader (wan_receiver.cpp)
  link::Verdict begin_frame(int peer, int s, const link::InCursor::Header& c);
  void end_frame(int peer, int s, const link::FrameHeader& h);
  void deliver(int peer, int s, const Arrival& a);
  void try_match(int peer);
  void match(int peer, const InMsgPtr& m);
  void send_ack(int peer, int s);
  void break_inbound(int peer, int s);
  // Staging for a message that has no receive yet, within the budget; unstage frees it
  // (the bytes moved to a receive, or were dropped) and lets stalled streams go on.
  void stage(InMsg& m);
  void unstage(InMsg& m);
  void resume_stalled();
  // Under emulated delay, when a frame stamped `sent_ns` may be acted on; false when at
  // once (no delay, due already, and nothing ahead of it held in `queue_empty`'s queue).
  bool held(std::int64_t sent_ns, bool queue_empty, Clock::time_point* due);
  RequestPtr send_to_self(Tag tag, const void* buf, std::size_t bytes);
  void apply_abort();
  // Best effort, before closing: a goodbye on every idle stream, both directions.
  void say_goodbye();
  // A goodbye from `peer` taking effect (in its stream's order), on either side.
  void on_goodbye(int peer, std::uint64_t sent_msgs);
  void farewell_outbound(int peer, int s, std::uint64_t sent_msgs);
  // Receives from a departing peer fail only once nothing can satisfy them: every message
  // it sent has been matched, or every stream has closed with nothing held.
  void settle_inbound(int peer);
  bool no_more_messages(const Inbound& in) const {
    return in.departing && (in.gone || in.next_match >= in.sent_msgs);
  }
  std::string departed(int peer) const;
  // After a goodbye, acknowledgements may still be on their way on the peer's other
  // streams (it acknowledges on the stream a frame came in on) or held by the emulated
  // delay: sends fail only once every stream has said goodbye or closed and no
  // acknowledgement is held, so a delivered one is never among them.
  void settle_departure(int peer);
  void close_all();
  std::int64_t now_ns() const;
  // Only the engine thread counts, but traffic() may read from any thread: relaxed atomics
  // keep those reads untorn without ordering anything else.
  static void count(std::atomic<std::uint64_t>& c, std::size_t n) {
    c.fetch_add(n, std::memory_order_relaxed);
  }

  WanOptions opt_;
  std::unique_ptr<TlsContext> tls_;  // null: streams in clear text
  bootstrap::auth::Gate gate_;        // every stream, in and out, proves it belongs to the job
  std::vector<Outbound> out_;
  std::vector<Inbound> in_;
  Clock::time_point next_due_ = Clock::time_point::max();
  std::mt19937_64 rng_;
  std::uint64_t reconnects_ = 0;
  std::size_t staged_ = 0;  // budgeted staging bytes held
  std::atomic<std::size_t> early_total_{0};  // Outbound::early_sends over all peers
  transport::BufferPool buffers_;  // memory of those copies and of staged messages, reused
  Clock::time_point sampled_{};
  mutable std::mutex path_mutex_;  // path() may be read from any thread
  transport::PathFigures published_;
  bool told_tuning_ = false, told_buffers_ = false;
  std::atomic<std::uint64_t> payload_sent_{0}, wire_sent_{0}, payload_received_{0}, resent_{0};
  bool abort_applied_ = false;
};

std::unique_ptr<transport::Transport> make_wan_transport(int rank, int size,
                                                         bootstrap::Store& store,
                                                         Clock::time_point deadline,
                                                         const WanOptions& options);

}  // namespace strata::wan
