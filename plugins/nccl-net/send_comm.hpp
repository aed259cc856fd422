// The sending half of a connection: queues isends, cuts them into frames, writes frames
// to the streams without blocking, and (striped) retires them on acknowledgement.
#pragma once

#include <chrono>
#include <deque>
#include <vector>

#include "comm.hpp"
#include "link_options.hpp"
#include "socket.hpp"
#include "wan/frame.hpp"
#include "wan/striping.hpp"

namespace strata::nccl_net {

class SendComm final : public TransferComm {
 public:
  SendComm(std::vector<Fd> streams, const LinkOptions& options, std::string peer);
  // nullptr when every request slot is in flight (NCCL retries later). Arguments are
  // checked by post_send.
  Request* isend(const void* data, std::size_t size, int tag);

 private:
  friend class TransferComm;  // poll() runs progress()
  void progress();
  struct OutFrame {
    wan::EncodedHeader header;
    const char* payload;
    std::size_t length;
    std::size_t written;  // of header + payload
    std::uint64_t seq;
    Request* req;
  };
  struct Stream {
    Fd fd;
    std::deque<OutFrame> frames;  // [0, next_write) written and awaiting an ack; rest unwritten
    std::size_t next_write = 0;
    bool blocked = false;  // the last write did not fit: poll before writing again
    bool ack_starved = false;
    std::size_t unacked = 0;  // payload bytes assigned and not acknowledged
    std::uint64_t next_seq = 1;
    wan::EncodedHeader ack{};
    std::size_t ack_got = 0;
    std::deque<std::pair<std::int64_t, std::uint64_t>> delayed_acks;  // (due ns, seq)
  };
  struct Pending {
    Request* req;
    const char* data;
    int tag;
    std::uint64_t msg_id;
    std::size_t next_offset;
  };


  bool assign(std::int64_t now_ns);
  bool write(Stream& s);
  bool read_acks(Stream& s, std::int64_t now_ns);
  void apply_ack(Stream& s, std::uint64_t seq);
  void retire(Request* r);

  std::vector<Stream> streams_;
  LinkOptions opt_;
  std::size_t max_unwritten_;  // frames a stream may hold unwritten before it counts as busy
  std::deque<Pending> pending_;  // not yet fully cut into frames, in isend order
  std::vector<wan::StreamLoad> loads_;  // scratch for assign()
  std::uint64_t next_msg_id_ = 0;
};

std::int64_t steady_ns();

}  // namespace strata::nccl_net
