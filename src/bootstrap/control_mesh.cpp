#include "bootstrap/control_mesh.hpp"

#include <atomic>
#include <cstring>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "base/accept_loop.hpp"
#include "base/asio.hpp"
#include "base/log.hpp"
#include "base/sys_errors.hpp"
#include "bootstrap.pb.h"
#include "bootstrap/auth_gate.hpp"
#include "bootstrap/store_protocol.hpp"
#include "bootstrap/tcp_store.hpp"
#include "strata/errors.hpp"

namespace strata::bootstrap {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {


std::string seconds(std::chrono::milliseconds d) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return s;
}

}  // namespace

class ControlMesh::Impl {
 public:
  Impl(int rank, int size, const std::string& bind_host, std::chrono::milliseconds heartbeat, const JobSecret& secret)
      : gate_("control mesh of rank " + std::to_string(rank), secret, auth::Channel::mesh, 4),
        accept_trouble_("control mesh on rank " + std::to_string(rank)), rank_(rank),
        peers_(static_cast<std::size_t>(size)), heartbeat_(heartbeat) {
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(bind_host, ec);
    if (ec) throw TransportError("control mesh: cannot listen on '" + bind_host + "': not an IP address");
    published_ = addr;
    const tcp::endpoint ep(net::bind_address(addr), 0);
    acceptor_.open(ep.protocol());
    acceptor_.bind(ep, ec);
    if (ec) throw TransportError("control mesh: cannot listen on " + bind_host + ": " + sys::describe(ec));
    acceptor_.listen(asio::socket_base::max_listen_connections);
    net::accept_forever(acceptor_, accept_retry_, accept_trouble_, [this](tcp::socket s) { adopt(std::move(s)); });
    thread_ = std::thread([this] { io_.run(); });
  }

  ~Impl() {
    goodbye();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  std::string address() const { return host() + ":" + std::to_string(acceptor_.local_endpoint().port()); }
  std::string host() const { return published_.to_string(); }

  void put(const std::string& key, const std::string& value, const std::vector<int>& to) {
    if (key.size() + value.size() + 64 > kMaxControlFrame)
      throw InvalidArgument("control mesh: the value of '" + key + "' is larger than a control frame");
    store(key, value);
    wire::ControlMessage m;
    m.set_kind(wire::ControlMessage::PUT);
    m.set_key(key);
    m.set_value(value);
    auto frame = std::make_shared<std::string>(encode_frame(m));
    asio::post(io_, [this, frame, to] {
      for (int r : to)
        if (r != rank_ && r >= 0 && r < static_cast<int>(peers_.size())) send(r, *frame);
    });
  }

  std::vector<std::string> wait(const std::vector<std::string>& keys, Clock::time_point deadline,
                                const std::vector<int>& needed) {
    std::unique_lock<std::mutex> lock(mu_);
    auto gone = [&]() -> int {
      for (int r : needed)
        if (r >= 0 && static_cast<std::size_t>(r) < lost_.size() && lost_[static_cast<std::size_t>(r)]) return r;
      return -1;
    };
    auto all_there = [&] {
      for (const auto& k : keys)
        if (!table_.count(k)) return false;
      return true;
    };
    cv_.wait_until(lock, deadline, [&] { return all_there() || gone() >= 0; });
    if (!all_there()) {
      if (const int r = gone(); r >= 0)
        throw PeerLostError("control mesh on rank " + std::to_string(rank_) + ": rank " + std::to_string(r) +
                                " was lost while the others waited for it",
                            {r});
      std::string missing;
      for (const auto& k : keys)
        if (!table_.count(k)) missing += (missing.empty() ? "" : ", ") + k;
      throw TimeoutError("control mesh on rank " + std::to_string(rank_) + ": timed out waiting for " + missing);
    }
    std::vector<std::string> out;
    for (const auto& k : keys) out.push_back(table_.at(k));
    return out;
  }

  void connect(const std::vector<std::string>& addresses, Clock::time_point deadline, Events events) {
    if (addresses.size() != peers_.size())
      throw InvalidArgument("control mesh: " + std::to_string(addresses.size()) + " addresses for " +
                            std::to_string(peers_.size()) + " ranks");
    asio::post(io_, [this, addresses, deadline] {
      addresses_ = addresses;
      dial_deadline_ = deadline;
      for (int r = rank_ + 1; r < static_cast<int>(peers_.size()); ++r) dial(r);
    });
    std::unique_lock<std::mutex> lock(mu_);
    const bool all = cv_.wait_until(lock, deadline, [&] { return up_ + 1 == static_cast<int>(peers_.size()) || !failed_.empty(); });
    if (!failed_.empty()) throw TransportError("control mesh on rank " + std::to_string(rank_) + ": " + failed_);
    if (!all) {
      std::string missing;
      for (std::size_t r = 0; r < peers_.size(); ++r)
        if (static_cast<int>(r) != rank_ && !connected_[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      throw TimeoutError("control mesh on rank " + std::to_string(rank_) + ": rank(s) " + missing +
                         " did not connect before the deadline");
    }
    lock.unlock();
    std::promise<void> started;
    asio::post(io_, [this, events = std::move(events), &started] {
      events_ = events;
      for (auto& e : early_) e();
      early_.clear();
      if (heartbeat_.count() > 0) tick();
      started.set_value();
    });
    started.get_future().wait();
  }

  void broadcast(const ControlNotice& n) {
    wire::ControlMessage m;
    m.set_kind(wire::ControlMessage::NOTICE);
    m.set_rank(n.from);
    m.set_code(n.code);
    m.set_seq(n.seq);
    for (int r : n.lost) m.add_lost(r);
    // Bounded so that the frame fits whatever limit a peer holds it to.
    m.set_text(n.text.substr(0, kMaxControlFrame / 2));
    auto frame = std::make_shared<std::string>(encode_frame(m));
    asio::post(io_, [this, frame] {
      for (std::size_t r = 0; r < peers_.size(); ++r)
        if (!peers_[r].gone) send(static_cast<int>(r), *frame);
    });
  }

  void goodbye() {
    if (said_goodbye_.exchange(true)) return;
    auto drained = std::make_shared<std::promise<void>>();
    auto future = drained->get_future();
    asio::post(io_, [this, drained] {
      leaving_ = true;
      wire::ControlMessage m;
      m.set_kind(wire::ControlMessage::GOODBYE);
      const std::string frame = encode_frame(m);
      for (std::size_t r = 0; r < peers_.size(); ++r)
        if (!peers_[r].gone && !peers_[r].lost) send(static_cast<int>(r), frame);
      on_drained_ = [drained] { drained->set_value(); };
      check_drained();
    });
    future.wait_for(std::chrono::seconds(1));
  }

 private:
  struct Conn {
    explicit Conn(tcp::socket s) : sock(std::move(s)) {}
    tcp::socket sock;
    unsigned char header[kFrameHeaderBytes]{};
    std::string body;
  };
  using ConnPtr = std::shared_ptr<Conn>;
  struct Peer {
    ConnPtr conn;
    bool gone = false;     // said goodbye
    bool lost = false;
    bool watched = false;  // a ring neighbour whose beats we expect
    Clock::time_point heard;
    std::deque<std::string> out;
    bool writing = false;
  };

  // Everything below runs on the mesh thread.

  // Only a connection that proved it belongs to the job (auth_gate.hpp) may name a rank.
  void adopt(tcp::socket s) {
    auto c = std::make_shared<Conn>(std::move(s));
    const std::shared_ptr<tcp::socket> sock(c, &c->sock);
    gate_.admit(sock, [this, c](const auth::Bytes& payload) {
      std::uint32_t claimed = 0;
      std::memcpy(&claimed, payload.data(), sizeof claimed);
      if (claimed >= static_cast<std::uint32_t>(rank_) || peers_[claimed].conn) {
        boost::system::error_code ec;
        gate_.refuse(remote(*c), "it claims rank " + std::to_string(claimed) +
                                     ", which is not a lower rank of this communicator still unconnected");
        c->sock.close(ec);
        return;
      }
      attach(static_cast<int>(claimed), c);
    });
  }

  void dial(int r) {
    const auto [host, port] = split_host_port(addresses_[static_cast<std::size_t>(r)], "control address of rank " + std::to_string(r));
    boost::system::error_code ec;
    const tcp::endpoint ep(asio::ip::make_address(host, ec), port);
    if (ec) return fail_connect("rank " + std::to_string(r) + " published a bad control address");
    auto c = std::make_shared<Conn>(tcp::socket(io_));
    c->sock.async_connect(ep, [this, r, c](boost::system::error_code ec) {
      if (ec) {
        if (Clock::now() >= dial_deadline_) return fail_connect("cannot reach rank " + std::to_string(r) + ": " + sys::describe(ec));
        auto retry = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(50));
        retry->async_wait([this, r, retry](boost::system::error_code e) {
          if (!e) dial(r);
        });
        return;
      }
      c->sock.set_option(tcp::no_delay(true), ec);
      const auto me = static_cast<std::uint32_t>(rank_);
      auth::Bytes payload(sizeof me);
      std::memcpy(payload.data(), &me, sizeof me);
      gate_.dial(std::shared_ptr<tcp::socket>(c, &c->sock), std::move(payload), [this, r, c](const std::string& error) {
        if (!error.empty()) return fail_connect("control connection to rank " + std::to_string(r) + ": " + error);
        attach(r, c);
      });
    });
  }

  void attach(int r, const ConnPtr& c) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    p.conn = c;
    p.heard = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      connected_[static_cast<std::size_t>(r)] = true;
      ++up_;
    }
    cv_.notify_all();
    read_frame(c, [this, r](const wire::ControlMessage& m) { return on_frame(r, m); },
               [this, r](const std::string& why) { on_closed(r, why); });
    send(r, "");  // starts any frame queued before the connection existed
  }

  // Reads frames until on_frame returns false or the connection ends (on_end).
  template <class OnFrame>
  void read_frame(const ConnPtr& c, OnFrame on_frame, std::function<void(const std::string&)> on_end = {}) {
    asio::async_read(c->sock, asio::buffer(c->header), [this, c, on_frame, on_end](boost::system::error_code ec, std::size_t) {
      if (ec) return on_end ? on_end(sys::describe(ec)) : void();
      const std::uint32_t len = frame_length(c->header);
      if (len > kMaxControlFrame) {
        if (on_end) on_end("a frame claimed " + std::to_string(len) + " bytes, more than " + std::to_string(kMaxControlFrame));
        return;
      }
      c->body.resize(len);
      asio::async_read(c->sock, asio::buffer(c->body), [this, c, on_frame, on_end](boost::system::error_code ec, std::size_t) {
        if (ec) return on_end ? on_end(sys::describe(ec)) : void();
        wire::ControlMessage m;
        if (!m.ParseFromString(c->body)) {
          if (on_end) on_end("a frame did not parse");
          return;
        }
        if (on_frame(m)) read_frame(c, on_frame, on_end);
      });
    });
  }

  bool on_frame(int r, const wire::ControlMessage& m) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (p.lost) return false;  // declared lost: whatever it says now comes too late
    p.heard = Clock::now();
    switch (m.kind()) {
      case wire::ControlMessage::BEAT: return true;
      case wire::ControlMessage::GOODBYE: p.gone = true; return true;
      case wire::ControlMessage::PUT:
        if (!store(m.key(), m.value())) {
          on_closed(r, "it put more into this rank's control table than the " +
                           std::to_string(kMaxControlTable >> 20) + " MiB allowed");
          return false;
        }
        return true;
      case wire::ControlMessage::NOTICE: {
        ControlNotice n;
        n.from = r;  // the connection says who sent it, whatever the frame claims
        n.code = m.code();
        n.seq = m.seq();
        for (int x : m.lost())
          if (x >= 0 && x < static_cast<int>(peers_.size())) {
            n.lost.push_back(x);
            if (x != rank_) mark_lost(x);  // found by another rank: frames from it are ignored here too
          }
        n.text = m.text();
        deliver([this, n] {
          if (events_.notice) events_.notice(n);
        });
        return true;
      }
      default:
        on_closed(r, "it sent an unexpected control frame");
        return false;
    }
  }

  void on_closed(int r, const std::string& why) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (p.gone || p.lost || leaving_) return;
    declare_lost(r, "its control connection ended without a goodbye (" + why + "): its process exited or was killed");
  }

  void mark_lost(int r) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    p.lost = true;
    p.watched = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lost_[static_cast<std::size_t>(r)] = true;
    }
    cv_.notify_all();
  }

  // Thread-safe; false when the table is full.
  bool store(const std::string& key, const std::string& value) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = table_.find(key);
      const std::size_t before = it == table_.end() ? 0 : key.size() + it->second.size();
      if (table_bytes_ - before + key.size() + value.size() > kMaxControlTable) return false;
      table_bytes_ = table_bytes_ - before + key.size() + value.size();
      table_[key] = value;
    }
    cv_.notify_all();
    return true;
  }

  void declare_lost(int r, const std::string& why) {
    mark_lost(r);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (up_ + 1 < static_cast<int>(peers_.size()))
        failed_ = "rank " + std::to_string(r) + " was lost while connecting: " + why;
    }
    cv_.notify_all();
    deliver([this, r, why] {
      if (events_.lost) events_.lost(r, why);
    });
  }

  void deliver(std::function<void()> f) {
    if (leaving_) return;  // the owner is going away: nobody to tell
    if (events_.lost || events_.notice) f();
    else early_.push_back(std::move(f));
  }

  // Heartbeats: beat to the live ring neighbours, and declare one lost after a period of
  // silence. A neighbour newly watched (the one before it was lost) gets a full period.
  void tick() {
    if (leaving_) return;
    const int n = static_cast<int>(peers_.size());
    auto live = [&](int r) { return !peers_[static_cast<std::size_t>(r)].lost && !peers_[static_cast<std::size_t>(r)].gone; };
    int prev = -1, next = -1;
    for (int k = 1; k < n && next < 0; ++k)
      if (live((rank_ + k) % n)) next = (rank_ + k) % n;
    for (int k = 1; k < n && prev < 0; ++k)
      if (live((rank_ - k + n) % n)) prev = (rank_ - k + n) % n;
    const auto now = Clock::now();
    wire::ControlMessage beat;
    beat.set_kind(wire::ControlMessage::BEAT);
    const std::string frame = encode_frame(beat);
    for (int r = 0; r < n; ++r) {
      if (r == rank_) continue;
      auto& p = peers_[static_cast<std::size_t>(r)];
      const bool neighbour = r == prev || r == next;
      if (neighbour) send(r, frame);
      if (neighbour && !p.watched) p.heard = now;
      p.watched = neighbour;
      const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.heard);
      if (p.watched && silent > heartbeat_)
        declare_lost(r, "silent on the control mesh for " + seconds(silent) + " (STRATA_HEARTBEAT_S=" + seconds(heartbeat_) +
                            "): its process is frozen, or its host or network is gone");
    }
    tick_timer_.expires_after(heartbeat_ / 4);
    tick_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) tick();
    });
  }

  void send(int r, const std::string& frame) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (!frame.empty()) p.out.push_back(frame);
    if (!p.conn || p.writing || p.out.empty()) return check_drained();
    p.writing = true;
    auto c = p.conn;
    asio::async_write(c->sock, asio::buffer(p.out.front()), [this, r, c](boost::system::error_code ec, std::size_t) {
      auto& q = peers_[static_cast<std::size_t>(r)];
      q.writing = false;
      q.out.pop_front();
      if (ec) q.out.clear();  // the read side reports the end
      send(r, "");
    });
  }

  void check_drained() {
    if (!on_drained_) return;
    for (const auto& p : peers_)
      if (p.writing) return;
    for (auto& p : peers_) {
      boost::system::error_code ec;
      if (p.conn) p.conn->sock.shutdown(tcp::socket::shutdown_send, ec);
    }
    std::exchange(on_drained_, nullptr)();
  }

  void fail_connect(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      failed_ = why;
    }
    cv_.notify_all();
  }

  static std::string remote(const Conn& c) {
    boost::system::error_code ec;
    const auto ep = c.sock.remote_endpoint(ec);
    return ec ? "an unknown address" : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  // The io_context first: sockets and timers on it must go before it does.
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  auth::Gate gate_;
  tcp::acceptor acceptor_{io_};
  asio::ip::address published_;  // the job's address; the acceptor may bind the wildcard
  asio::steady_timer accept_retry_{io_};
  asio::steady_timer tick_timer_{io_};
  sys::AcceptTrouble accept_trouble_;
  int rank_;
  std::vector<Peer> peers_;
  std::chrono::milliseconds heartbeat_;
  std::vector<std::string> addresses_;
  Clock::time_point dial_deadline_;
  Events events_;
  std::vector<std::function<void()>> early_;  // events before connect() returned
  bool leaving_ = false;
  std::function<void()> on_drained_;
  std::atomic<bool> said_goodbye_{false};

  std::mutex mu_;  // what connect() and wait() wait on
  std::condition_variable cv_;
  std::vector<bool> connected_ = std::vector<bool>(peers_.size());
  std::vector<bool> lost_ = std::vector<bool>(peers_.size());
  std::map<std::string, std::string> table_;
  std::size_t table_bytes_ = 0;
  int up_ = 0;
  std::string failed_;

  std::thread thread_;
};

ControlMesh::ControlMesh(int rank, int size, const std::string& bind_host, std::chrono::milliseconds heartbeat,
                         const JobSecret& secret)
    : impl_(std::make_unique<Impl>(rank, size, bind_host, heartbeat, secret)) {}
ControlMesh::~ControlMesh() = default;
std::string ControlMesh::address() const { return impl_->address(); }
std::string ControlMesh::host() const { return impl_->host(); }
void ControlMesh::put(const std::string& key, const std::string& value, const std::vector<int>& to) {
  impl_->put(key, value, to);
}
std::vector<std::string> ControlMesh::wait(const std::vector<std::string>& keys, Clock::time_point deadline,
                                           const std::vector<int>& needed) {
  return impl_->wait(keys, deadline, needed);
}
void ControlMesh::connect(const std::vector<std::string>& addresses, Clock::time_point deadline, Events events) {
  impl_->connect(addresses, deadline, std::move(events));
}
void ControlMesh::broadcast(const ControlNotice& n) { impl_->broadcast(n); }
void ControlMesh::goodbye() { impl_->goodbye(); }

}  // namespace strata::bootstrap
