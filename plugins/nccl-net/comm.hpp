// What NCCL holds as void*: listen, send and receive comms, and requests.
//
// Threading (NCCL's contract): one comm is used by one thread at a time, different comms
// concurrently (the "NCCL Service" thread connects, the "NCCL Progress" thread sends and
// tests). Each comm still takes its own mutex on entry, which costs nothing uncontended and
// keeps a host that breaks the rule from corrupting state. Nothing is shared between comms.
//
// Progress happens only inside isend/irecv/test calls on the comm, as in NCCL's own
// Socket transport without helper threads: NCCL polls test() continuously.
//
// A send or receive comm is one of two implementations, fixed at connection time: the
// plugin's own TCP framing (SendComm/RecvComm: direct or striped) or UCX (UcxSendComm/
// UcxRecvComm, same region only). Comms carry no vtable (see Comm), so the few calls
// that differ (post_send, post_recv, progress, destroy) switch on path() in comm.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "devices.hpp"
#include "nccl_abi.hpp"

namespace strata::nccl_net {

class TransferComm;
struct Request;

struct Slot {  // one buffer of a (possibly grouped) receive
  char* buf = nullptr;
  std::size_t capacity = 0;
  int tag = 0;
  std::size_t bytes = 0;  // size of the message that matched it
  bool matched = false;
  // UCX path: the ucp receive for this buffer, the request it belongs to (the completion
  // callback's way back), and whether that callback has run (it can run inside
  // ucp_tag_recv_nbx, before the call returns the handle).
  void* op = nullptr;
  Request* request = nullptr;
  bool op_done = false;
};

struct Request {
  static constexpr std::uint32_t kLive = 0x51525453;  // "STRQ"
  std::uint32_t magic = 0;
  TransferComm* owner = nullptr;
  bool done = false;
  // send
  std::size_t size = 0;
  std::size_t stripes_left = 0;  // frames not yet written (direct) or acknowledged (striped)
  bool all_assigned = false;
  void* op = nullptr;  // UCX path: the ucp send in flight, and whether it has called back
  bool op_done = false;
  // receive
  int n = 0;
  int slots_matched = 0, slots_done = 0;
  Slot slots[kMaxRecvs];
};

// A fixed set of requests per comm: when all are in flight, isend/irecv return a null
// request and NCCL retries later.
class RequestPool {
 public:
  explicit RequestPool(std::size_t capacity);
  Request* get(TransferComm* owner);
  void put(Request* r);
  // Every request handed out and not yet put back (closing a comm cancels their work).
  template <class F>
  void for_each_live(F&& f) {
    for (std::size_t i = 0; i < capacity_; ++i)
      if (storage_[i].magic == Request::kLive) f(storage_[i]);
  }

 private:
  std::unique_ptr<Request[]> storage_;
  std::size_t capacity_;
  std::vector<Request*> free_;
};

// Deliberately not polymorphic: the magic check below reads a pointer NCCL handed back
// before trusting it, and with no vtable that read needs no live object behind it.
// Comms are always deleted through their own type.
class Comm {
 public:
  enum class Kind : std::uint32_t { listen = 0x4C525453, send = 0x53525453, recv = 0x52525453 };
  explicit Comm(Kind kind) : magic_(kind) {}
  ~Comm() { magic_ = Kind{}; }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  // Whether a pointer NCCL passed looks like a live comm of this kind (catches null,
  // closed and swapped comms; not arbitrary garbage).
  static bool is(const void* p, Kind kind) {
    return p && static_cast<const Comm*>(p)->magic_ == kind;
  }
  Kind kind() const { return magic_; }
  std::mutex mu;

 private:
  Kind magic_;
};

// Shared by send and receive comms: the request pool and the comm's failure. A failure
// (socket error, peer gone, protocol violation) is final: every unfinished request and
// every later call on the comm reports it.
class TransferComm : public Comm {
 public:
  enum class Path : std::uint8_t { tcp, ucx };
  // NCCL_NET_MAX_REQUESTS x maxRecvs: what NCCL may have in flight on the send side.
  static constexpr std::size_t kRequests = abi::kMaxRequests * kMaxRecvs;

  TransferComm(Kind kind, Path path, std::string peer)
      : Comm(kind), pool_(kRequests), path_(path), peer_(std::move(peer)) {}
  // Advances the comm (its implementation's progress()) and records, never throws, a failure.
  void poll() noexcept;
  // Throws the recorded failure, if any.
  void check() const;
  void release(Request* r) { pool_.put(r); }
  // An already complete request (iflush: host memory has nothing to flush).
  Request* flush_request() {
    Request* r = pool_.get(this);
    if (r) r->done = true;
    return r;
  }
  Path path() const { return path_; }
  const std::string& peer() const { return peer_; }

 protected:
  ~TransferComm() = default;  // deleted through destroy(), as its implementation
  void fail(abi::Result code, const std::string& why);
  bool failed() const { return failed_; }
  RequestPool pool_;

 private:
  Path path_;
  std::string peer_;
  bool failed_ = false;
  abi::Result fail_code_ = abi::success;
  std::string fail_reason_;
};

// isend/irecv on either implementation, after the checks NCCL's contract allows (sizes,
// null buffers, n within maxRecvs, distinct tags in a group). Null: retry later.
Request* post_send(TransferComm& c, const void* data, std::size_t size, int tag);
Request* post_recv(TransferComm& c, int n, void* const* data, const std::size_t* sizes, const int* tags);

// Deletes a send or receive comm as the type it was made as.
void destroy(TransferComm* c) noexcept;
struct DestroyComm {
  void operator()(TransferComm* c) const noexcept { destroy(c); }
};
using TransferCommPtr = std::unique_ptr<TransferComm, DestroyComm>;

}  // namespace strata::nccl_net
