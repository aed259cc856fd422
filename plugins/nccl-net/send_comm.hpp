// The sending half of a connection: queues isends, cuts them into frames, writes frames
// to the streams without blocking, and (striped) retires them on acknowledgement. The
// frames' numbering, resend queue and acknowledgements are link/stream_core.hpp's, as in
// libstrata's WAN link; a striped stream that breaks waits for the receiver to redial it
// (stream_rejoin.hpp) and then resends what was not acknowledged.
#pragma once

#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include "comm.hpp"
#include "link_options.hpp"
#include "socket.hpp"
#include "stream_rejoin.hpp"
#include "wire.hpp"
#include "link/frame.hpp"
#include "link/stream_core.hpp"
#include "link/striping.hpp"

namespace strata::nccl_net {

class SendComm final : public TransferComm {
 public:
  // `rejoins`: where broken streams come back (striped links with options.rejoin).
  SendComm(std::vector<Wire> streams, const LinkOptions& options, std::string peer, RejoinListener rejoins);
  // nullptr when every request slot is in flight (NCCL retries later). Arguments are
  // checked by post_send.
  Request* isend(const void* data, std::size_t size, int tag);

 private:
  friend class TransferComm;  // poll() runs progress()
  void progress();
  struct Stream {
    Wire wire;  // invalid while broken and not yet redialled
    link::OutQueue<Request*> q;
    bool blocked = false;  // the last write did not fit: poll before writing again
    bool ack_starved = false;
    link::EncodedHeader ack{};
    std::size_t ack_got = 0;
    std::deque<std::pair<std::int64_t, std::uint64_t>> delayed_acks;  // (due ns, seq)
    std::uint64_t frames_written = 0;
    std::int64_t down_since = 0;  // steady ns of the break, while broken
    std::string why;              // what broke it
  };
  struct Pending {
    Request* req;
    const char* data;
    int tag;
    std::uint64_t msg_id;
    std::size_t next_offset;
  };

  bool assign(std::int64_t now_ns);
  bool write(Stream& s, std::int64_t now_ns);
  bool read_acks(Stream& s, std::int64_t now_ns);
  void retire(Request* r);
  // A striped stream failed: close it and wait for the receiver to redial; elsewhere the
  // failure is final and propagates.
  void broken(Stream& s, const std::string& why);
  // Takes back streams the receiver redialled.
  bool restore();
  bool any_down() const;

  std::vector<Stream> streams_;
  LinkOptions opt_;
  std::size_t max_unwritten_;  // frames a stream may hold unwritten before it counts as busy
  std::deque<Pending> pending_;  // not yet fully cut into frames, in isend order
  std::vector<link::StreamLoad> loads_;  // scratch for assign()
  std::uint64_t next_msg_id_ = 0;
  RejoinListener rejoins_;  // after streams_: closed first, so a redial is refused, not reset
  bool cut_done_ = false;
  Wire cut_wire_;  // the emulated cut's socket, written to no more
  bool receiver_closed_ = false;  // it said goodbye: nothing more will be acknowledged
};

std::int64_t steady_ns();

}  // namespace strata::nccl_net
