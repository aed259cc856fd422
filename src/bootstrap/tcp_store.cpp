#include "bootstrap/tcp_store.hpp"

#include "base/asio.hpp"
#include <atomic>
#include <future>
#include <list>
#include <mutex>
#include <thread>

#include "bootstrap.pb.h"
#include "base/accept_loop.hpp"
#include "base/keepalive.hpp"
#include "bootstrap/auth_gate.hpp"
#include "base/log.hpp"
#include "base/sys_errors.hpp"
#include "strata/errors.hpp"

namespace strata::bootstrap {

namespace {

// A store connection can sit idle for the whole job (a grow's store, an arbiter): the
// kernel's keepalive keeps middleboxes from forgetting it and finds a peer gone, and a
// request unanswered at the TCP level for 10 s fails instead of blocking for minutes
// (a partition: the arbiter's caller must hear that it cannot be reached).
void keep_alive(boost::asio::ip::tcp::socket& s, std::chrono::milliseconds idle) {
  net::keep_alive(s.native_handle(), idle, std::chrono::seconds(10));
}

}  // namespace

namespace asio = boost::asio;
using asio::ip::tcp;

std::pair<std::string, std::uint16_t> split_host_port(const std::string& addr,
                                                      const std::string& what) {
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size())
    throw InvalidArgument(what + " '" + addr + "' is not host:port");
  std::string host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    size_t used = 0;
    port = std::stoi(addr.substr(colon + 1), &used);
    if (used != addr.size() - colon - 1) port = -1;
  } catch (...) {
    port = -1;
  }
  if (port < 0 || port > 65535) throw InvalidArgument(what + " '" + addr + "' has a bad port");
  return {host, static_cast<std::uint16_t>(port)};
}

namespace {

tcp::endpoint resolve(asio::io_context& io, const std::string& host, std::uint16_t port) {
  tcp::resolver r(io);
  boost::system::error_code ec;
  auto results = r.resolve(host, std::to_string(port), ec);
  if (ec || results.empty())
    throw InvalidArgument("cannot resolve rendezvous host '" + host + "': " + ec.message());
  return *results.begin();
}

// Request bodies are read in pieces of at most this much, each reserved from the shared
// budget first, so memory follows the bytes that actually arrived, not a claimed length.
constexpr std::size_t kReadPiece = 64u << 10;

}  // namespace

// ---------------------------------------------------------------------------- server

class StoreServer::Impl {
 public:
  Impl(const std::string& host, std::uint16_t port, StoreServerLimits limits, const JobSecret& secret)
      : limits_(limits), state_(limits.store), gate_("the rendezvous store", secret, auth::Channel::store, 0, limits.handshake),
        acceptor_(io_), accept_retry_(io_),
        accept_trouble_("the rendezvous store") {
    const tcp::endpoint published = resolve(io_, host, port);
    const tcp::endpoint ep(net::bind_address(published.address(), limits.bind_any), published.port());
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    boost::system::error_code ec;
    acceptor_.bind(ep, ec);
    if (ec)
      throw TransportError("rendezvous store cannot listen on " + host + ":" +
                           std::to_string(port) + ": " + sys::describe(ec));
    acceptor_.listen();
    accept();
    // Return only once the thread runs: a caller that forks right away (as launchers do)
    // must not fork while the new thread is still starting up inside the allocator.
    std::promise<void> running;
    asio::post(io_, [&running] { running.set_value(); });
    thread_ = std::thread([this] { io_.run(); });
    running.get_future().wait();
  }
  ~Impl() {
    // Answer every held GET (with what is missing) before going away, so a rank whose
    // rendezvous fails learns why instead of seeing the connection drop.
    std::promise<void> answered;
    asio::post(io_, [this, &answered] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      accept_retry_.cancel();
      for (auto& w : waiters_) {
        w->answered = true;
        w->timer.cancel();
        answer(w->conn, w->keys, true);
      }
      waiters_.clear();
      answered.set_value();
    });
    answered.get_future().wait_for(std::chrono::seconds(1));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (writes_in_flight_.load() > 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::size_t connections() const { return open_.load(); }
  std::string trouble() const { return accept_trouble_.what(); }

 private:
  struct Conn : std::enable_shared_from_this<Conn> {
    Conn(tcp::socket s, asio::io_context& io) : sock(std::move(s)), deadline(io) {}
    tcp::socket sock;
    asio::steady_timer deadline;  // armed while a request is incomplete
    unsigned char header[kFrameHeaderBytes];
    std::string body;
    std::size_t want = 0;      // length of the request being read
    std::size_t reserved = 0;  // of the shared budget, for body
    bool known = false;        // has sent a whole request: may idle between requests
    bool closed = false;
    std::string reply;
  };
  using ConnPtr = std::shared_ptr<Conn>;
  // Shared with its timer's callback: a fired timer cannot be cancelled any more, so the
  // callback must find out itself that the GET was already answered.
  struct Waiter {
    ConnPtr conn;
    std::vector<std::string> keys;
    asio::steady_timer timer;
    bool answered = false;
    Waiter(ConnPtr c, std::vector<std::string> k, asio::io_context& io)
        : conn(std::move(c)), keys(std::move(k)), timer(io) {}
  };

  // Whatever connects may be noise or an attack: a few lines say what is happening,
  // without letting a flood of connections flood the log too.
  void note_dropped(const std::string& why) {
    if (++dropped_ <= 3 || dropped_ % 1000 == 0)
      log::warn("rendezvous store: dropped a connection (" + std::to_string(dropped_) + " so far): " + why);
  }

  void accept() {
    net::accept_forever(acceptor_, accept_retry_, accept_trouble_, [this](tcp::socket s) {
      boost::system::error_code ec;
      if (open_.load() >= limits_.max_connections) {
        if (!full_logged_)
          log::warn("rendezvous store: closing new connections while " + std::to_string(open_.load()) +
                    " are open (limit " + std::to_string(limits_.max_connections) + ")");
        full_logged_ = true;
        s.close(ec);
        return;
      }
      full_logged_ = false;
      s.set_option(tcp::no_delay(true), ec);
      keep_alive(s, limits_.keepalive);
      // Nothing of a connection is read as a request before it proved it belongs to the
      // job: a stranger can neither read nor write a key.
      auto c = std::make_shared<Conn>(std::move(s), io_);
      gate_.admit(std::shared_ptr<tcp::socket>(c, &c->sock), [this, c](const auth::Bytes&) {
        ++open_;
        arm(c, limits_.first_request);
        read(c);
      });
    });
  }

  // Closes c if its request is not complete within `within`.
  void arm(const ConnPtr& c, std::chrono::milliseconds within) {
    c->deadline.expires_after(within);
    c->deadline.async_wait([this, c](boost::system::error_code ec) {
      if (!ec) close(c);
    });
  }

  void close(const ConnPtr& c) {
    if (c->closed) return;
    c->closed = true;
    --open_;
    release(c);
    boost::system::error_code ec;
    c->deadline.cancel();
    c->sock.close(ec);
  }

  void release(const ConnPtr& c) {
    buffered_ -= c->reserved;
    c->reserved = 0;
    if (c->body.capacity() > kReadPiece) std::string().swap(c->body);
    // Budget came free: connections parked for it go on.
    auto parked = std::move(parked_);
    parked_.clear();
    for (auto& p : parked)
      if (!p->closed) read_body(p);
  }

  void read(const ConnPtr& c) {
    asio::async_read(c->sock, asio::buffer(c->header), [this, c](boost::system::error_code ec, std::size_t) {
      if (ec) return close(c);
      const std::size_t n = frame_length(c->header);
      if (n > limits_.store.max_request) {
        note_dropped("it announced a " + std::to_string(n) + "-byte request (limit " +
                     std::to_string(limits_.store.max_request) + ")");
        return close(c);
      }
      c->want = n;
      c->body.clear();
      if (c->known) arm(c, limits_.frame);
      read_body(c);
    });
  }

  void read_body(const ConnPtr& c) {
    if (c->body.size() == c->want) return complete(c);
    const std::size_t piece = std::min(kReadPiece, c->want - c->body.size());
    if (buffered_ + piece > limits_.max_buffered) {
      parked_.push_back(c);  // the deadline still runs: a stalled sender is dropped
      return;
    }
    buffered_ += piece;
    c->reserved += piece;
    const std::size_t at = c->body.size();
    c->body.resize(at + piece);
    asio::async_read(c->sock, asio::buffer(c->body.data() + at, piece),
                     [this, c](boost::system::error_code ec, std::size_t) {
                       if (ec) return close(c);
                       read_body(c);
                     });
  }

  void complete(const ConnPtr& c) {
    c->deadline.cancel();
    StoreState::Outcome o = state_.handle(c->body);
    release(c);
    if (!o.response.error().empty() && !c->known) {
      note_dropped("its first request was refused: " + o.response.error());
      return close(c);
    }
    c->known = true;
    if (o.hold) {
      auto w = std::make_shared<Waiter>(c, std::move(o.keys), io_);
      waiters_.push_back(w);
      w->timer.expires_after(std::chrono::milliseconds(o.timeout_ms));
      w->timer.async_wait([this, w](boost::system::error_code) {
        if (w->answered) return;
        w->answered = true;
        answer(w->conn, w->keys, true);
        waiters_.remove(w);
      });
      return;
    }
    respond(c, o.response);
    if (o.wakes_waiters) wake_waiters();
  }

  void respond(const ConnPtr& c, const wire::StoreResponse& resp) {
    if (c->closed) return;
    c->reply = encode_frame(resp);
    ++writes_in_flight_;
    asio::async_write(c->sock, asio::buffer(c->reply), [this, c](boost::system::error_code ec, std::size_t) {
      --writes_in_flight_;
      if (ec) return close(c);
      read(c);
    });
  }

  bool answer(const ConnPtr& c, const std::vector<std::string>& keys, bool final) {
    auto r = state_.answer_get(keys, final);
    if (!r) return false;
    respond(c, *r);
    return true;
  }

  void wake_waiters() {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      auto& w = **it;
      if (answer(w.conn, w.keys, false)) {
        w.answered = true;
        w.timer.cancel();
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const StoreServerLimits limits_;
  StoreState state_;
  asio::io_context io_;
  auth::Gate gate_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_;
  sys::AcceptTrouble accept_trouble_;
  std::thread thread_;
  std::list<std::shared_ptr<Waiter>> waiters_;
  std::vector<ConnPtr> parked_;  // waiting for room in the shared budget
  std::size_t buffered_ = 0;     // request bytes reserved by all connections
  bool full_logged_ = false;
  std::uint64_t dropped_ = 0;
  std::atomic<std::size_t> open_{0};
  std::atomic<int> writes_in_flight_{0};
};

StoreServer::StoreServer(const std::string& host, std::uint16_t port, const JobSecret& secret, StoreServerLimits limits)
    : impl_(std::make_unique<Impl>(host, port, limits, secret)) {}
StoreServer::~StoreServer() = default;
std::uint16_t StoreServer::port() const { return impl_->port(); }
std::size_t StoreServer::connections() const { return impl_->connections(); }
std::string StoreServer::trouble() const { return impl_->trouble(); }

// ---------------------------------------------------------------------------- client

class TcpStore::Impl {
 public:
  Impl(const std::string& host, std::uint16_t port, Clock::time_point deadline, const JobSecret& secret,
       const net::SocketSettings& sockets)
      : sock_(std::make_shared<tcp::socket>(io_)), host_(host), port_(port) {
    const tcp::endpoint ep = resolve(io_, host, port);
    boost::system::error_code ec;
    for (;;) {
      sock_->connect(ep, ec);
      if (!ec) break;
      sock_->close();
      if (Clock::now() > deadline)
        throw TimeoutError("cannot reach the rendezvous store at " + host + ":" +
                           std::to_string(port) + " (" + sys::describe(ec) +
                           "): is rank 0 running and STRATA_ROOT the same on every rank?");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    sock_->set_option(tcp::no_delay(true));
    keep_alive(*sock_, sockets.keepalive);
    auth::Gate gate("rendezvous store client", secret, auth::Channel::store, 0, auth::GateLimits{sockets.handshake});
    std::string error;
    gate.dial(sock_, {}, [&error](const std::string& e) { error = e.empty() ? "" : e; });
    io_.run();
    io_.restart();
    if (!error.empty())
      throw TransportError("the rendezvous store at " + host + ":" + std::to_string(port) + ": " + error +
                           " (is STRATA_JOB_SECRET the same on every rank?)");
  }

  wire::StoreResponse call(const wire::StoreRequest& req) {
    const std::string out = encode_frame(req);
    if (out.size() - kFrameHeaderBytes > limits_.max_request)
      throw InvalidArgument("rendezvous store request of " + std::to_string(out.size()) + " bytes exceeds the " +
                            std::to_string(limits_.max_request) + "-byte limit");
    boost::system::error_code ec;
    asio::write(*sock_, asio::buffer(out), ec);
    unsigned char header[kFrameHeaderBytes];
    if (!ec) asio::read(*sock_, asio::buffer(header), ec);
    std::string body;
    std::string problem;
    if (!ec) {
      const std::size_t n = frame_length(header);
      if (n > limits_.max_reply) {
        problem = "a reply of " + std::to_string(n) + " bytes exceeds the " + std::to_string(limits_.max_reply) +
                  "-byte limit";
      } else {
        body.resize(n);
        asio::read(*sock_, asio::buffer(body), ec);
      }
    }
    wire::StoreResponse resp;
    if (!ec && problem.empty() && !resp.ParseFromString(body)) problem = "malformed reply";
    if (ec || !problem.empty())
      throw TransportError("lost the rendezvous store at " + host_ + ":" + std::to_string(port_) + ": " +
                           (ec ? sys::describe(ec) : problem));
    if (!resp.error().empty())
      throw InvalidArgument("the rendezvous store at " + host_ + ":" + std::to_string(port_) +
                            " refused the request: " + resp.error());
    return resp;
  }

  std::string local_address() const { return sock_->local_endpoint().address().to_string(); }

 private:
  const StoreLimits limits_;
  asio::io_context io_;
  std::shared_ptr<tcp::socket> sock_;
  std::string host_;
  std::uint16_t port_;
};

TcpStore::TcpStore(const std::string& host, std::uint16_t port, Clock::time_point deadline, const JobSecret& secret,
                   const net::SocketSettings& sockets)
    : impl_(std::make_unique<Impl>(host, port, deadline, secret, sockets)) {}
TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const std::string& value) {
  const StoreLimits limits;
  if (key.size() > limits.max_key || value.size() > limits.max_value)
    throw InvalidArgument("rendezvous store: key '" + key.substr(0, 64) + "' (" + std::to_string(key.size()) +
                          " bytes) with a " + std::to_string(value.size()) + "-byte value exceeds the limits (" +
                          std::to_string(limits.max_key) + "-byte keys, " + std::to_string(limits.max_value) +
                          "-byte values)");
  wire::StoreRequest req;
  req.set_op(wire::StoreRequest::SET);
  req.add_keys(key);
  req.set_value(value);
  impl_->call(req);
}

std::vector<std::string> TcpStore::get(const std::vector<std::string>& keys,
                                       Clock::time_point deadline) {
  wire::StoreRequest req;
  req.set_op(wire::StoreRequest::GET);
  for (const auto& k : keys) req.add_keys(k);
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  req.set_timeout_ms(static_cast<std::uint32_t>(std::max<long long>(left, 0)));
  const auto resp = impl_->call(req);
  if (!resp.ok()) {
    std::string missing;
    for (int i = 0; i < resp.missing_size() && i < 16; ++i)
      missing += (i ? ", " : "") + resp.missing(i);
    if (resp.missing_size() > 16) missing += ", ...";
    throw TimeoutError("rendezvous timed out waiting for " + missing);
  }
  return {resp.values().begin(), resp.values().end()};
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  wire::StoreRequest req;
  req.set_op(wire::StoreRequest::ADD);
  req.add_keys(key);
  req.set_delta(delta);
  return impl_->call(req).counter();
}

std::string TcpStore::local_address() const { return impl_->local_address(); }

}  // namespace strata::bootstrap
