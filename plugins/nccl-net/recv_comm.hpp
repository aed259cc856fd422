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
//
// Frames are parsed by link/frame_reader.hpp, the loop the WAN link parses them with; its
// cursor (link/stream_core.hpp) checks headers and acknowledges. A striped stream that
// breaks is redialled to the sender (stream_rejoin.hpp); frames it resends that had
// already arrived are read into scratch and dropped, never into a buffer that may have
// gone back to NCCL.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm.hpp"
#include "handle.hpp"
#include "link_options.hpp"
#include "socket.hpp"
#include "stream_rejoin.hpp"
#include "wire.hpp"
#include "link/frame.hpp"
#include "link/frame_reader.hpp"
#include "link/stream_core.hpp"

namespace strata::nccl_net {

class RecvComm final : public TransferComm {
 public:
  // `first`: the connection's first hello, naming the sender's rejoin port (options.rejoin).
  RecvComm(std::vector<Wire> streams, const LinkOptions& options, std::string peer, const Hello& first);
  // Striped: a goodbye on every stream, so the sender fails what is in flight at once
  // instead of waiting for a redial that will not come.
  ~RecvComm();
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
    Wire wire;  // invalid while broken and not yet redialled
    link::FrameReader reader;
    char* dest = nullptr;  // where the current frame's payload goes (resolve)
    link::EncodedHeader ack{};
    std::size_t ack_written = 0;
    bool ack_writing = false;
    std::deque<Arrival> delayed;
    bool eof = false;
    bool starved = false;  // the last read found nothing: poll before reading again
    // Broken: redialling, with backoff, since down_since.
    std::unique_ptr<Redial> redial;
    std::int64_t down_since = 0, retry_at = 0;
    int failures = 0;
    std::string why;
  };

  struct FrameIo;  // how pump() feeds a stream's reader (recv_comm.cpp)
  bool pump(Stream& s);
  // Whether the frame with header h can be read now: its message matched to a receive
  // buffer (s.dest set), or matched before; false holds the stream.
  bool resolve(Stream& s, const link::FrameHeader& h);
  void deliver(Stream& s, const Arrival& a);
  bool send_ack(Stream& s);
  // A striped stream failed: drop the frame in progress and redial; elsewhere the failure
  // is final and propagates.
  void break_stream(Stream& s, const std::string& why);
  bool redial(Stream& s, std::int64_t now_ns);
  void retry_later(Stream& s, std::int64_t now_ns);
  int index(const Stream& s) const { return static_cast<int>(&s - streams_.data()); }

  std::vector<Stream> streams_;
  LinkOptions opt_;
  std::deque<Request*> posted_;  // receives with unmatched buffers, in posting order
  std::unordered_map<std::uint64_t, InMsg> msgs_;  // matched, not complete
  std::uint64_t next_match_ = 0;
  Hello first_{};
  sockaddr_storage rejoin_addr_{};  // the sender's rejoin port
  socklen_t rejoin_len_ = 0;
  std::vector<char> scratch_;  // resent payloads, read and dropped
  std::uint64_t dropped_ = 0;  // resent frames dropped, for the log
};

}  // namespace strata::nccl_net
