#include "transport/tcp/tcp_transport.hpp"

#include "base/keepalive.hpp"
#include "transport/tcp/tcp_request.hpp"

#include <cstring>

#include "bootstrap/tcp_store.hpp"
#include "base/sys_errors.hpp"
#include "strata/errors.hpp"

namespace strata::transport::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr std::size_t kMaxBatch = 64;               // frames per writev

}  // namespace

TcpTransport::TcpTransport(int rank, int size, const std::string& bind_host, const bootstrap::JobSecret& secret,
                           std::size_t unexpected_budget, const net::SocketSettings& sockets)
    : AsioTransport("tcp transport", rank, bind_host, sockets),
      gate_("tcp transport of rank " + std::to_string(rank), secret, bootstrap::auth::Channel::tcp, 4,
            bootstrap::auth::GateLimits{sockets.handshake}),
      out_(size),
      in_(size),
      unexpected_budget_(unexpected_budget),
      keepalive_(sockets.keepalive) {
  accept();
}



TcpTransport::~TcpTransport() { close_sockets(); }

void TcpTransport::close_sockets() {
  boost::system::error_code ec;
  net_.close_listener();
  for (auto& o : out_)
    if (o.sock) o.sock->close(ec);
  for (auto& i : in_)
    if (i.sock) i.sock->close(ec);
}

void TcpTransport::accept() {
  net_.accept([this](tcp::socket s) {
    boost::system::error_code ec;
    s.set_option(tcp::no_delay(true), ec);
    net::keep_alive(s.native_handle(), keepalive_, std::chrono::milliseconds(0));
    read_hello(std::make_shared<tcp::socket>(std::move(s)));
  });
}

void TcpTransport::read_hello(std::shared_ptr<tcp::socket> s) {
  gate_.admit(s, [this, s](const bootstrap::auth::Bytes& payload) {
    std::uint32_t claimed = 0;
    std::memcpy(&claimed, payload.data(), sizeof claimed);
    const int peer = static_cast<int>(claimed);
    boost::system::error_code ec;
    if (claimed >= static_cast<std::uint32_t>(size()) || in_[peer].sock) {
      // It knows the secret, so it is one of ours confused (a restarted process?): say so.
      gate_.refuse(bootstrap::auth::Gate::peer_of(*s), "it claims rank " + std::to_string(claimed) +
                   (claimed >= static_cast<std::uint32_t>(size()) ? ", which does not exist" : ", which is connected already"));
      s->close(ec);
      return;
    }
    in_[peer].sock = std::make_unique<tcp::socket>(std::move(*s));
    pump(peer);
  });
}

RequestPtr TcpTransport::irecv(int peer, Tag tag, void* buf, std::size_t capacity) {
  auto req = new_request<CopyRequest>(peer, tag, buf, capacity);
  if (req->done()) return req;
  auto& in = in_.at(static_cast<std::size_t>(peer));
  if (auto u = in.unexpected.take(tag)) {
    if (u->complete) {
      deliver(peer, *u, *req, pool_);
      release(*u);
    } else {
      u->waiting = req;
    }
    return req;
  }
  if (!in.failed.empty()) {
    req->fail("rank " + std::to_string(peer) + ": " + in.failed);
    return req;
  }
  in.posted.push(tag, req);
  if (in.stalled) {  // the frame it waits for may be this receive's
    in.stalled = false;
    pump(peer);
  }
  return req;
}

RequestPtr TcpTransport::send_to_self(Tag tag, const void* buf, std::size_t bytes) {
  auto& in = in_[rank_];
  transport::deliver_to_self(rank_, tag, buf, bytes, in.posted, in.unexpected, pool_,
                             [](BufferPool::Buffer copy, std::size_t n) {
                               auto u = std::make_shared<Unexpected>();
                               u->buffer = std::move(copy);
                               u->size = n;
                               u->complete = true;
                               return u;
                             });
  auto req = std::make_shared<CopyRequest>(rank_, tag, const_cast<void*>(buf), bytes);
  req->complete(bytes);
  return req;
}

RequestPtr TcpTransport::isend(int peer, Tag tag, const void* buf, std::size_t bytes) {
  if (peer == rank_ && !aborted()) return send_to_self(tag, buf, bytes);
  auto& out = out_.at(static_cast<std::size_t>(peer));
  auto req = new_request<CopyRequest>(peer, tag, buf, bytes, out.failed);
  if (req->done()) return req;
  // Sent by the next progress(), so frames posted together leave in one writev.
  if (out.queue.empty() && !out.writing) dirty_.push_back(peer);
  out.queue.push_back(req);
  return req;
}

void TcpTransport::connect(int peer) {
  auto& out = out_[peer];
  out.sock = std::make_shared<tcp::socket>(net_.io());
  const auto [host, port] = bootstrap::split_host_port(net_.peer_address(peer), "address of rank " + std::to_string(peer));
  boost::system::error_code ec;
  const tcp::endpoint ep(asio::ip::make_address(host, ec), port);
  if (ec) return fail_outbound(peer, "bad address " + net_.peer_address(peer));
  out.sock->async_connect(ep, [this, peer](boost::system::error_code ec) {
    auto& o = out_[peer];
    if (ec) return fail_outbound(peer, "cannot connect to " + net_.peer_address(peer) + ": " + sys::describe(ec));
    o.sock->set_option(tcp::no_delay(true), ec);
    net::keep_alive(o.sock->native_handle(), keepalive_, std::chrono::milliseconds(0));
    const auto me = static_cast<std::uint32_t>(rank_);
    bootstrap::auth::Bytes payload(sizeof me);
    std::memcpy(payload.data(), &me, sizeof me);
    gate_.dial(o.sock, std::move(payload), [this, peer](const std::string& error) {
      if (!error.empty()) return fail_outbound(peer, error);
      out_[peer].connected = true;
      watch(peer);
      flush(peer);
    });
  });
}

void TcpTransport::watch(int peer) {
  auto& o = out_[peer];
  o.sock->async_read_some(asio::buffer(&o.watch_byte, 1), [this, peer](boost::system::error_code ec, std::size_t) {
    if (ec == asio::error::operation_aborted || aborted()) return;
    auto& out = out_[peer];
    if (!out.failed.empty()) return;
    // Only what was never written fails now: a write under way may have delivered its
    // bytes before the close, and its own completion says whether it did.
    out.failed = "it closed its connection (it exited or destroyed its communicator)";
    out.connected = false;
    const std::string msg = "rank " + std::to_string(peer) + ": " + out.failed;
    for (auto& r : out.queue) r->fail(msg);
    out.queue.clear();
  });
}

void TcpTransport::flush(int peer) {
  auto& out = out_[peer];
  if (!out.connected || out.writing || out.queue.empty()) return;
  const std::size_t n = std::min(out.queue.size(), kMaxBatch);
  out.in_flight.assign(out.queue.begin(), out.queue.begin() + static_cast<long>(n));
  out.queue.erase(out.queue.begin(), out.queue.begin() + static_cast<long>(n));
  out.headers.resize(n);
  std::vector<asio::const_buffer> bufs;
  bufs.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& r = out.in_flight[i];
    out.headers[i] = Header{r->tag, r->size};
    bufs.emplace_back(&out.headers[i], sizeof(Header));
    if (r->size) bufs.emplace_back(r->buf, r->size);
  }
  out.writing = true;
  asio::async_write(*out.sock, bufs, net::transfer_whole, [this, peer](auto ec, std::size_t) {
    auto& o = out_[peer];
    o.writing = false;
    if (ec) return fail_outbound(peer, "send failed: " + ec.message());
    for (auto& r : o.in_flight) r->complete(r->size);
    o.in_flight.clear();
    flush(peer);
  });
}

void TcpTransport::fail_outbound(int peer, const std::string& why) {
  auto& out = out_[peer];
  out.failed = why;
  out.connected = false;
  const std::string msg = "rank " + std::to_string(peer) + ": " + why;
  for (auto& r : out.in_flight) r->fail(msg);
  for (auto& r : out.queue) r->fail(msg);
  out.in_flight.clear();
  out.queue.clear();
}

void TcpTransport::fail_inbound(int peer, const std::string& why) {
  auto& in = in_[peer];
  if (aborted()) return;
  in.failed = why;
  const std::string msg = "rank " + std::to_string(peer) + ": " + why;
  if (in.req) in.req->fail(msg);
  if (in.unexpected_msg && in.unexpected_msg->waiting) in.unexpected_msg->waiting->fail(msg);
  in.req.reset();
  in.unexpected_msg.reset();
  in.posted.for_each([&](auto& r) { r->fail(msg); });
  in.posted.clear();
}


void TcpTransport::apply_abort() {
  if (abort_applied_) return;
  abort_applied_ = true;
  const std::string why = abort_reason();
  for (auto& o : out_) {
    for (auto& r : o.in_flight) r->fail(why);
    for (auto& r : o.queue) r->fail(why);
    o.in_flight.clear();
    o.queue.clear();
  }
  for (auto& i : in_) {
    i.posted.for_each([&](auto& r) { r->fail(why); });
    i.posted.clear();
    i.unexpected.for_each([&](auto& u) {
      if (u->waiting) u->waiting->fail(why);
    });
  }
  // Closing stops every read in progress: no late bytes land in a caller's buffer.
  close_sockets();
}

bool TcpTransport::progress() {
  // Peers cannot reach a rank that cannot accept them: say why now, not at the deadline.
  if (net_.must_abort()) {
    apply_abort();
    return false;
  }
  for (int peer : dirty_) {
    if (!out_[peer].sock) connect(peer);
    else flush(peer);
  }
  dirty_.clear();
  return net_.poll();
}

void TcpTransport::wait_event(std::chrono::microseconds max) {
  if (aborted()) return apply_abort();
  if (!dirty_.empty()) {
    progress();
    return;
  }
  net_.run_one_for(max);
}

void TcpTransport::abort(const std::string& why) {
  net_.abort(why);
}

}  // namespace strata::transport::tcp
