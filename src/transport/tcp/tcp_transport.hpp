// Plain TCP on Boost.Asio. Each rank sends on connections it opened and receives on
// connections it accepted, so a pair uses two one-way streams and never has to decide
// who connects to whom; connections open lazily on the first send.
//
// Frames are a 16-byte header (tag, length) and the payload. A frame whose receive is
// already posted is read straight into the user's buffer; otherwise into an unexpected
// buffer that the matching receive copies from later, as long as the unexpected bytes
// held stay within their budget. A frame that does not fit stalls its stream (nothing
// more is read from that peer) until its receive is posted or the budget frees up: a
// length from the wire is never allocated on its own say-so.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "base/asio.hpp"
#include "bootstrap/auth_gate.hpp"
#include "transport/asio_transport.hpp"
#include "transport/tag_queues.hpp"
#include "transport/tcp/tcp_request.hpp"
#include "base/socket_settings.hpp"
#include "transport/transport.hpp"

namespace strata::transport::tcp {

struct Unexpected;

class TcpTransport : public AsioTransport {
 public:
  // Listens on bind_host at once; peers' addresses come later, before the first send.
  // Every connection proves it knows `secret` before it may carry a frame.
  TcpTransport(int rank, int size, const std::string& bind_host, const bootstrap::JobSecret& secret,
               std::size_t unexpected_budget = std::size_t{1} << 30, const net::SocketSettings& sockets = {});
  ~TcpTransport() override;

  const char* name() const override { return "tcp"; }
  int size() const override { return static_cast<int>(out_.size()); }
  RequestPtr isend(int peer, Tag tag, const void* buf, std::size_t bytes) override;
  RequestPtr irecv(int peer, Tag tag, void* buf, std::size_t capacity) override;
  bool probe(int peer, Tag tag) override { return in_.at(static_cast<std::size_t>(peer)).unexpected.contains(tag); }
  bool progress() override;
  void wait_event(std::chrono::microseconds max) override;
  void abort(const std::string& why) override;

 private:
  struct Header {
    std::uint64_t tag;
    std::uint64_t bytes;
  };
  struct Outbound {
    std::shared_ptr<boost::asio::ip::tcp::socket> sock;
    bool connected = false;
    bool writing = false;
    std::string failed;
    std::deque<std::shared_ptr<CopyRequest>> queue;  // not yet written
    std::vector<std::shared_ptr<CopyRequest>> in_flight;
    std::vector<Header> headers;  // storage for the in-flight batch's headers
    char watch_byte = 0;          // the receiver never writes: a read ends only when it closes
  };
  // Receive side of one peer's stream. Bytes arrive into `rbuf` in as few reads as
  // possible and frames are parsed out of it; a large payload whose receive is posted
  // bypasses the buffer and is read straight into the caller's memory.
  struct Inbound {
    std::unique_ptr<boost::asio::ip::tcp::socket> sock;
    std::string failed;
    std::vector<char> rbuf;
    std::size_t rpos = 0, rend = 0;
    bool in_payload = false;    // a header was parsed; `remaining` payload bytes follow
    bool stalled = false;       // the buffered header's frame waits for a receive or budget
    bool large = false;         // the last frame's payload was large enough to read directly
    Header header{};
    char* target = nullptr;     // where payload goes; null: drop it (truncated receive)
    std::size_t remaining = 0;
    std::shared_ptr<CopyRequest> req;  // the posted receive being filled, or
    std::shared_ptr<Unexpected> unexpected_msg;  // the unexpected buffer being filled
    TagQueues<std::shared_ptr<CopyRequest>> posted;
    TagQueues<std::shared_ptr<Unexpected>> unexpected;
  };

  void accept();
  void read_hello(std::shared_ptr<boost::asio::ip::tcp::socket> s);
  void pump(int peer);          // parse what is buffered, then read more
  bool begin_frame(int peer);   // a header arrived: find where its payload goes (false: stall)
  void release(Unexpected& u);  // its bytes leave the unexpected budget
  void resume_stalled();
  void end_frame(int peer);     // its payload is complete
  void connect(int peer);
  // The peer closing our connection means it is gone (exited, destroyed its transport):
  // sends to it fail at once instead of at their deadline.
  void watch(int peer);
  void flush(int peer);
  void fail_outbound(int peer, const std::string& why);
  void fail_inbound(int peer, const std::string& why);
  RequestPtr send_to_self(Tag tag, const void* buf, std::size_t bytes);
  // On the engine thread, once after abort(): fails everything pending, closes sockets.
  void apply_abort();
  void close_sockets();

  bootstrap::auth::Gate gate_;  // inbound connections must pass it; outbound ones prove themselves
  std::vector<Outbound> out_;
  std::vector<Inbound> in_;
  std::vector<int> dirty_;
  BufferPool pool_{std::size_t{256} << 20};  // unexpected messages' staging
  const std::size_t unexpected_budget_;
  // Idle time before the kernel probes a connection (STRATA_KEEPALIVE_S): a peer in
  // another region reached without the WAN link crosses the same middleboxes.
  const std::chrono::milliseconds keepalive_;
  std::size_t unexpected_held_ = 0;  // bytes of unexpected frames from peers, not yet received
  bool abort_applied_ = false;
};

}  // namespace strata::transport::tcp
