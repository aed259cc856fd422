// The receiving half of a connection.
//
// Matching follows NCCL: messages match receives in posting order, and within a grouped
// receive (n buffers) a message goes to the buffer with its tag. Messages are numbered by
// the sender, so the receiver matches message m only after m-1; a stream whose next frame
// belongs to a message it cannot match yet (no receive posted, or an earlier message not
// seen yet on another stream) is simply not read further. Its bytes wait in the kernel, so
// nothing is ever staged and payloads go straight from the socket into NCCL's buffers.
// That cannot deadlock: a sender assigns all stripes of message m before any of m+1, so
// the earliest unmatched message always heads some stream.
#pragma once

#include <deque>
#include <unordered_map>
#include <vector>

#include "comm.hpp"
#include "link_options.hpp"
#include "socket.hpp"
#include "wan/frame.hpp"

namespace strata::nccl_net {

class RecvComm final : public TransferComm {
 public:
  RecvComm(std::vector<Fd> streams, const LinkOptions& options, std::string peer);
  // nullptr when every request slot is in flight. Arguments are checked by post_recv.
  Request* irecv(int n, void* const* data, const std::size_t* sizes, const int* tags);

 private:
  friend class TransferComm;  // poll() runs progress()
  void progress();
  struct InMsg {
    Request* req;
    int slot;
    std::size_t total, received;
  };
  struct Arrival {  // a frame whose payload is in place, delivered once due
    std::int64_t due_ns;
    std::uint64_t seq, msg_id;
    std::size_t length;
  };
  struct Stream {
    Fd fd;
    wan::EncodedHeader raw{};
    std::size_t header_got = 0;
    bool have_header = false, in_payload = false;
    wan::FrameHeader h{};
    char* dest = nullptr;
    std::size_t payload_got = 0;
    std::uint32_t crc = 0;
    std::uint64_t expect_seq = 1, delivered_seq = 0, acked_seq = 0;
    wan::EncodedHeader ack{};
    std::size_t ack_written = 0;
    bool ack_writing = false;
    std::deque<Arrival> delayed;
    bool eof = false;
    bool starved = false;  // the last read found nothing: poll before reading again
  };


  bool pump(Stream& s);
  bool resolve(Stream& s);
  void deliver(Stream& s, const Arrival& a);
  bool send_ack(Stream& s);

  std::vector<Stream> streams_;
  LinkOptions opt_;
  std::deque<Request*> posted_;  // receives with unmatched buffers, in posting order
  std::unordered_map<std::uint64_t, InMsg> msgs_;  // matched, not complete
  std::uint64_t next_match_ = 0;
};

}  // namespace strata::nccl_net
