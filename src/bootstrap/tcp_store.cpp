#include "bootstrap/tcp_store.hpp"

#include "core/asio.hpp"
#include <atomic>
#include <future>
#include <list>
#include <map>
#include <thread>

#include "bootstrap.pb.h"
#include "strata/errors.hpp"

namespace strata::bootstrap {

namespace asio = boost::asio;
using asio::ip::tcp;
namespace wire = strata::bootstrap::wire;

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

// A frame is a 4-byte little-endian length and a serialized message.
constexpr std::uint32_t kMaxFrame = 64u << 20;

std::string frame(const google::protobuf::MessageLite& m) {
  std::string body = m.SerializeAsString();
  const auto n = static_cast<std::uint32_t>(body.size());
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + body;
}

std::uint32_t frame_length(const unsigned char* h) {
  return h[0] | (h[1] << 8) | (h[2] << 16) | (static_cast<std::uint32_t>(h[3]) << 24);
}

tcp::endpoint resolve(asio::io_context& io, const std::string& host, std::uint16_t port) {
  tcp::resolver r(io);
  boost::system::error_code ec;
  auto results = r.resolve(host, std::to_string(port), ec);
  if (ec || results.empty())
    throw InvalidArgument("cannot resolve rendezvous host '" + host + "': " + ec.message());
  return *results.begin();
}

}  // namespace

// ---------------------------------------------------------------------------- server

class StoreServer::Impl {
 public:
  Impl(const std::string& host, std::uint16_t port) : acceptor_(io_) {
    const tcp::endpoint ep = resolve(io_, host, port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    boost::system::error_code ec;
    acceptor_.bind(ep, ec);
    if (ec)
      throw TransportError("rendezvous store cannot listen on " + host + ":" +
                           std::to_string(port) + ": " + ec.message());
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
      for (auto& w : waiters_) {
        w->answered = true;
        w->timer.cancel();
        try_answer(w->conn, w->keys, true);
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

 private:
  struct Conn : std::enable_shared_from_this<Conn> {
    explicit Conn(tcp::socket s) : sock(std::move(s)) {}
    tcp::socket sock;
    unsigned char header[4];
    std::string body;
    std::string reply;
  };
  // Shared with its timer's callback: a fired timer cannot be cancelled any more, so the
  // callback must find out itself that the GET was already answered.
  struct Waiter {
    std::shared_ptr<Conn> conn;
    std::vector<std::string> keys;
    asio::steady_timer timer;
    bool answered = false;
    Waiter(std::shared_ptr<Conn> c, std::vector<std::string> k, asio::io_context& io)
        : conn(std::move(c)), keys(std::move(k)), timer(io) {}
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec) return;
      s.set_option(tcp::no_delay(true));
      read(std::make_shared<Conn>(std::move(s)));
      accept();
    });
  }

  void read(std::shared_ptr<Conn> c) {
    asio::async_read(c->sock, asio::buffer(c->header), [this, c](auto ec, size_t) {
      if (ec) return;
      const auto n = frame_length(c->header);
      if (n > kMaxFrame) return;
      c->body.resize(n);
      asio::async_read(c->sock, asio::buffer(c->body), [this, c](auto ec2, size_t) {
        if (!ec2) handle(c);
      });
    });
  }

  void respond(const std::shared_ptr<Conn>& c, const wire::StoreResponse& resp) {
    c->reply = frame(resp);
    ++writes_in_flight_;
    asio::async_write(c->sock, asio::buffer(c->reply), [this, c](auto ec, size_t) {
      --writes_in_flight_;
      if (!ec) read(c);
    });
  }

  bool try_answer(const std::shared_ptr<Conn>& c, const std::vector<std::string>& keys,
                  bool final) {
    wire::StoreResponse resp;
    for (const auto& k : keys) {
      auto it = data_.find(k);
      if (it == data_.end()) resp.add_missing(k);
      else resp.add_values(it->second);
    }
    if (resp.missing_size() > 0 && !final) return false;
    resp.set_ok(resp.missing_size() == 0);
    if (!resp.ok()) resp.clear_values();
    respond(c, resp);
    return true;
  }

  void handle(const std::shared_ptr<Conn>& c) {
    wire::StoreRequest req;
    if (!req.ParseFromString(c->body)) return;
    wire::StoreResponse resp;
    switch (req.op()) {
      case wire::StoreRequest::SET:
        if (req.keys_size() != 1) return;
        data_[req.keys(0)] = req.value();
        resp.set_ok(true);
        respond(c, resp);
        wake_waiters();
        return;
      case wire::StoreRequest::ADD: {
        if (req.keys_size() != 1) return;
        counters_[req.keys(0)] += req.delta();
        resp.set_ok(true);
        resp.set_counter(counters_[req.keys(0)]);
        respond(c, resp);
        return;
      }
      case wire::StoreRequest::GET: {
        std::vector<std::string> keys(req.keys().begin(), req.keys().end());
        if (try_answer(c, keys, false)) return;
        auto w = std::make_shared<Waiter>(c, std::move(keys), io_);
        waiters_.push_back(w);
        w->timer.expires_after(std::chrono::milliseconds(req.timeout_ms()));
        w->timer.async_wait([this, w](boost::system::error_code) {
          if (w->answered) return;
          w->answered = true;
          try_answer(w->conn, w->keys, true);
          waiters_.remove(w);
        });
        return;
      }
      default:
        return;
    }
  }

  void wake_waiters() {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      auto& w = **it;
      if (try_answer(w.conn, w.keys, false)) {
        w.answered = true;
        w.timer.cancel();
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::map<std::string, std::string> data_;
  std::map<std::string, std::int64_t> counters_;
  std::list<std::shared_ptr<Waiter>> waiters_;
  std::atomic<int> writes_in_flight_{0};
};

StoreServer::StoreServer(const std::string& host, std::uint16_t port)
    : impl_(std::make_unique<Impl>(host, port)) {}
StoreServer::~StoreServer() = default;
std::uint16_t StoreServer::port() const { return impl_->port(); }

// ---------------------------------------------------------------------------- client

class TcpStore::Impl {
 public:
  Impl(const std::string& host, std::uint16_t port, Clock::time_point deadline)
      : sock_(io_), host_(host), port_(port) {
    const tcp::endpoint ep = resolve(io_, host, port);
    boost::system::error_code ec;
    for (;;) {
      sock_.connect(ep, ec);
      if (!ec) break;
      sock_.close();
      if (Clock::now() > deadline)
        throw TimeoutError("cannot reach the rendezvous store at " + host + ":" +
                           std::to_string(port) + " (" + ec.message() +
                           "): is rank 0 running and STRATA_ROOT the same on every rank?");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    sock_.set_option(tcp::no_delay(true));
  }

  wire::StoreResponse call(const wire::StoreRequest& req) {
    const std::string out = frame(req);
    boost::system::error_code ec;
    asio::write(sock_, asio::buffer(out), ec);
    unsigned char header[4];
    if (!ec) asio::read(sock_, asio::buffer(header), ec);
    std::string body;
    if (!ec) {
      body.resize(frame_length(header));
      asio::read(sock_, asio::buffer(body), ec);
    }
    wire::StoreResponse resp;
    if (ec || !resp.ParseFromString(body))
      throw TransportError("lost the rendezvous store at " + host_ + ":" +
                           std::to_string(port_) + ": " +
                           (ec ? ec.message() : std::string("malformed reply")));
    return resp;
  }

  std::string local_address() const { return sock_.local_endpoint().address().to_string(); }

 private:
  asio::io_context io_;
  tcp::socket sock_;
  std::string host_;
  std::uint16_t port_;
};

TcpStore::TcpStore(const std::string& host, std::uint16_t port, Clock::time_point deadline)
    : impl_(std::make_unique<Impl>(host, port, deadline)) {}
TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const std::string& value) {
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
