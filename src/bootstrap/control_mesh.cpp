#include "bootstrap/control_mesh.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "base/accept_loop.hpp"
#include "base/asio.hpp"
#include "base/keepalive.hpp"
#include "base/log.hpp"
#include "base/sys_errors.hpp"
#include "bootstrap.pb.h"
#include "bootstrap/auth_gate.hpp"
#include "bootstrap/mesh_link.hpp"
#include "bootstrap/store_protocol.hpp"
#include "bootstrap/tcp_store.hpp"
#include "strata/errors.hpp"

namespace strata::bootstrap {

namespace asio = boost::asio;
using asio::ip::tcp;
using Message = wire::ControlMessage;

namespace {

// Without heartbeats, how long a broken connection may take to come back before its peer
// is lost (a peer whose process is gone is found at once regardless).
constexpr std::chrono::milliseconds kRedialWindow{10000};
// How often the mesh looks at its peers: beats, idle beats, silences, broken connections.
constexpr std::chrono::milliseconds kTickAtMost{250};
// A dial or a probe that has not connected by then is tried again later.
constexpr std::chrono::milliseconds kConnectTimeout{1000};
// Attempts to reconnect (or probe) a broken peer: a few quick ones first, since a dying
// process may still hold its port for a moment, then two a second.
constexpr int kQuickAttempts = 10;
constexpr std::chrono::milliseconds kQuickRetry{50}, kSlowRetry{500};
constexpr std::chrono::milliseconds kReadGrace{200};  // on_write_failed
// How long the higher rank of a broken pair waits for the lower to dial before nudging it.
constexpr std::chrono::milliseconds kNudgeAfter{1000};
// The handshake payload names the dialling rank; this bit marks a probe, which only asks
// whether a process still listens here and is closed at once, and with the nudge bit also
// says that the prober's side of their connection broke: a middlebox that forgot a flow
// may have reset one side only, and only the lower rank dials.
constexpr std::uint32_t kProbeBit = 1u << 31, kNudgeBit = 1u << 30;

std::string seconds(std::chrono::milliseconds d) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return s;
}

// What to check when ranks cannot reach each other across regions.
constexpr const char* kReachHint =
    "a rank behind NAT needs STRATA_ADVERTISE_ADDR (the address other regions reach it at), and a firewall "
    "between regions must let through STRATA_PORT_RANGE (set it on every rank to ports it opens)";

bool reliable(Message::Kind k) {
  return k == Message::NOTICE || k == Message::PUT || k == Message::GOODBYE;
}

}  // namespace

class ControlMesh::Impl {
 public:
  Impl(int rank, int size, const std::string& bind_host, MeshTiming timing, const JobSecret& secret)
      : gate_("control mesh of rank " + std::to_string(rank), secret, auth::Channel::mesh, 4,
              auth::GateLimits{timing.handshake}),
        accept_trouble_("control mesh on rank " + std::to_string(rank)), rank_(rank),
        peers_(static_cast<std::size_t>(size)), timing_(timing),
        window_(timing.heartbeat.count() > 0 ? timing.heartbeat : kRedialWindow) {
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(bind_host, ec);
    if (ec) throw TransportError("control mesh: cannot listen on '" + bind_host + "': not an IP address");
    published_ = addr;
    const auto bind = net::bind_address(addr, timing.bind_any);
    const auto l = net::listen_in_range(bind.to_string(), timing.ports, "control mesh of rank " + std::to_string(rank), 0,
                                        true);
    acceptor_.assign(bind.is_v6() ? tcp::v6() : tcp::v4(), l.fd, ec);
    if (ec) {
      ::close(l.fd);
      throw TransportError("control mesh: cannot listen on " + bind_host + ": " + sys::describe(ec));
    }
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
    auto m = std::make_shared<Message>();
    m->set_kind(Message::PUT);
    m->set_key(key);
    m->set_value(value);
    asio::post(io_, [this, m, to] {
      for (int r : to)
        if (r != rank_ && r >= 0 && r < static_cast<int>(peers_.size())) send_reliable(r, *m);
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

  std::vector<int> confirm_dead(const std::vector<int>& ranks, std::chrono::milliseconds budget) {
    struct Result {
      std::mutex mu;
      std::condition_variable cv;
      std::vector<int> dead;
      std::size_t answered = 0;
    };
    auto res = std::make_shared<Result>();
    std::size_t asked = 0;
    for (int r : ranks) {
      if (r < 0 || r >= static_cast<int>(peers_.size()) || r == rank_) continue;
      ++asked;
      asio::post(io_, [this, r, res] {
        probe_liveness(r, [res, r](bool dead) {
          std::lock_guard<std::mutex> lock(res->mu);
          if (dead) res->dead.push_back(r);
          ++res->answered;
          res->cv.notify_all();
        });
      });
    }
    std::unique_lock<std::mutex> lock(res->mu);
    res->cv.wait_for(lock, budget, [&] { return res->answered == asked; });
    auto dead = res->dead;
    std::sort(dead.begin(), dead.end());
    return dead;
  }

  void connect(const std::vector<std::string>& addresses, Clock::time_point deadline, Events events,
               std::vector<std::string> livenesses) {
    livenesses_ = std::move(livenesses);
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
      std::string missing, unreachable;
      for (std::size_t r = 0; r < peers_.size(); ++r) {
        if (static_cast<int>(r) == rank_ || connected_[r]) continue;
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        if (!dial_errors_[r].empty())
          unreachable += "; rank " + std::to_string(r) + " is not reachable at " + dial_errors_[r];
      }
      throw TimeoutError("control mesh on rank " + std::to_string(rank_) + ": rank(s) " + missing +
                         " did not connect before the deadline" + unreachable + " (the ranks dial those above them; " +
                         "this rank listens at " + address() + "); " + kReachHint);
    }
    lock.unlock();
    std::promise<void> started;
    asio::post(io_, [this, events = std::move(events), &started] {
      events_ = events;
      for (auto& e : early_) e();
      early_.clear();
      tick();
      started.set_value();
    });
    started.get_future().wait();
  }

  void broadcast(const ControlNotice& n) {
    auto m = std::make_shared<Message>();
    m->set_kind(Message::NOTICE);
    m->set_rank(n.from);
    m->set_code(n.code);
    m->set_seq(n.seq);
    for (int r : n.lost) m->add_lost(r);
    // Bounded so that the frame fits whatever limit a peer holds it to.
    m->set_text(n.text.substr(0, kMaxControlFrame / 2));
    asio::post(io_, [this, m] {
      for (std::size_t r = 0; r < peers_.size(); ++r)
        if (static_cast<int>(r) != rank_ && !peers_[r].gone && !peers_[r].lost) send_reliable(static_cast<int>(r), *m);
    });
  }

  void goodbye() {
    if (said_goodbye_.exchange(true)) return;
    auto drained = std::make_shared<std::promise<void>>();
    auto future = drained->get_future();
    asio::post(io_, [this, drained] {
      leaving_ = true;
      Message m;
      m.set_kind(Message::GOODBYE);
      for (std::size_t r = 0; r < peers_.size(); ++r)
        if (static_cast<int>(r) != rank_ && !peers_[r].gone && !peers_[r].lost) send_reliable(static_cast<int>(r), m);
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
    ConnPtr conn;            // the live connection, if any
    bool gone = false;       // said goodbye
    bool lost = false;
    bool watched = false;    // a ring neighbour whose beats we expect
    bool resumed = false;    // the peer's RESUME arrived on conn: reliable frames may flow
    bool dialing = false;    // a redial (lower rank) or a probe (higher rank) is under way
    int attempts = 0;        // since the connection broke
    unsigned chain = 0;      // the current run of reconnection attempts
    bool ack_due = false;
    Clock::time_point heard;  // the last frame from it
    Clock::time_point sent;   // the last frame to it
    Clock::time_point beat;   // the last heartbeat to it
    std::optional<Clock::time_point> broken;  // since when its connection is down
    std::string broke_why;
    std::deque<std::string> out;  // frames for conn, in order
    bool writing = false;
    MeshLink link;
  };

  // Everything below runs on the mesh thread.

  // Only a connection that proved it belongs to the job (auth_gate.hpp) may name a rank.
  void adopt(tcp::socket s) {
    auto c = std::make_shared<Conn>(std::move(s));
    const std::shared_ptr<tcp::socket> sock(c, &c->sock);
    gate_.admit(sock, [this, c](const auth::Bytes& payload) {
      std::uint32_t claimed = 0;
      std::memcpy(&claimed, payload.data(), sizeof claimed);
      boost::system::error_code ec;
      if (claimed & kProbeBit) {  // a peer asking whether this process still listens: it does
        c->sock.close(ec);
        const auto from = static_cast<int>(claimed & ~(kProbeBit | kNudgeBit));
        if ((claimed & kNudgeBit) && from > rank_ && from < static_cast<int>(peers_.size()) &&
            peers_[static_cast<std::size_t>(from)].conn)
          on_broken(from, peers_[static_cast<std::size_t>(from)].conn, "rank " + std::to_string(from) +
                                                                          " found its side of the connection broken");
        return;
      }
      // A lower rank dials; a second connection from it replaces the first (it dialled
      // again because its side of the first broke). A peer declared lost stays lost.
      if (claimed >= static_cast<std::uint32_t>(rank_) || peers_[claimed].lost) {
        gate_.refuse(remote(*c), "it claims rank " + std::to_string(claimed) +
                                     ", which is not a lower rank of this communicator still taking part");
        c->sock.close(ec);
        return;
      }
      attach(static_cast<int>(claimed), c);
    });
  }

  void tune(tcp::socket& s) {
    boost::system::error_code ec;
    s.set_option(tcp::no_delay(true), ec);
    // Unacknowledged for half the window: broken, and dialled again within the window.
    net::keep_alive(s.native_handle(), timing_.keepalive, std::max(window_ / 2, std::chrono::milliseconds(1000)));
  }

  std::optional<tcp::endpoint> endpoint_of(int r) {
    const auto [host, port] =
        split_host_port(addresses_[static_cast<std::size_t>(r)], "control address of rank " + std::to_string(r));
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(host, ec);
    if (ec) return std::nullopt;
    return tcp::endpoint(addr, port);
  }

  // Connects to rank r's control port, giving up after kConnectTimeout; done(ec) once.
  void connect_to(int r, const ConnPtr& c, std::function<void(boost::system::error_code)> done) {
    const auto ep = endpoint_of(r);
    if (!ep) return done(asio::error::address_family_not_supported);
    auto timer = std::make_shared<asio::steady_timer>(io_, kConnectTimeout);
    auto fired = std::make_shared<bool>(false);
    timer->async_wait([c, fired](boost::system::error_code e) {
      if (e) return;
      *fired = true;
      boost::system::error_code ignored;
      c->sock.close(ignored);
    });
    c->sock.async_connect(*ep, [timer, fired, done = std::move(done)](boost::system::error_code ec) {
      timer->cancel();
      done(*fired ? asio::error::timed_out : ec);
    });
  }

  // The first connection to a higher rank, retried until the creation deadline.
  void dial(int r) {
    if (!endpoint_of(r)) return fail_connect("rank " + std::to_string(r) + " published a bad control address");
    auto c = std::make_shared<Conn>(tcp::socket(io_));
    connect_to(r, c, [this, r, c](boost::system::error_code ec) {
      if (ec) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          dial_errors_[static_cast<std::size_t>(r)] = addresses_[static_cast<std::size_t>(r)] + ": " + sys::describe(ec);
        }
        if (Clock::now() >= dial_deadline_)
          return fail_connect("cannot reach rank " + std::to_string(r) + " at " + addresses_[static_cast<std::size_t>(r)] +
                              ": " + sys::describe(ec) + "; " + kReachHint);
        auto retry = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(50));
        retry->async_wait([this, r, retry](boost::system::error_code e) {
          if (!e) dial(r);
        });
        return;
      }
      handshake(r, c, 0, [this, r](const std::string& error) {
        fail_connect("control connection to rank " + std::to_string(r) + ": " + error);
      });
    });
  }

  void handshake(int r, const ConnPtr& c, std::uint32_t flags, std::function<void(const std::string&)> failed) {
    const std::uint32_t me = static_cast<std::uint32_t>(rank_) | flags;
    auth::Bytes payload(sizeof me);
    std::memcpy(payload.data(), &me, sizeof me);
    gate_.dial(std::shared_ptr<tcp::socket>(c, &c->sock), std::move(payload),
               [this, r, c, flags, failed = std::move(failed)](const std::string& error) {
                 if (!error.empty()) return failed(error);
                 if (flags & kProbeBit) return;  // the peer closes it
                 attach(r, c);
               });
  }

  // After the connection to a higher rank broke: dial again (at most one attempt at a
  // time; the tick retries). A host that refuses has no process on that port any more.
  void redial(int r) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (p.dialing || p.conn || p.lost || p.gone || leaving_) return;
    p.dialing = true;
    auto c = std::make_shared<Conn>(tcp::socket(io_));
    connect_to(r, c, [this, r, c](boost::system::error_code ec) {
      auto& q = peers_[static_cast<std::size_t>(r)];
      if (ec) {
        q.dialing = false;
        if (ec == asio::error::connection_refused) declare_dead(r);
        return;
      }
      handshake(r, c, 0, [this, r](const std::string&) { peers_[static_cast<std::size_t>(r)].dialing = false; });
    });
  }

  // After the connection from a lower rank broke, while it dials again: is its process
  // still there?
  void probe(int r) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (p.dialing || p.conn || p.lost || p.gone || leaving_) return;
    p.dialing = true;
    // Only once the lower rank had time to notice itself: a nudge that crosses its redial
    // would end the fresh connection.
    const bool nudge = p.broken && Clock::now() - *p.broken >= kNudgeAfter;
    probe_port(r, nudge, [this, r](bool dead) {
      peers_[static_cast<std::size_t>(r)].dialing = false;
      if (dead) declare_dead(r);
    });
  }

  // done(true) when r's host refuses a connection to r's control port. An accepted one
  // is ended by the job's handshake with the probe bit, so r does not log it as refused;
  // `nudge`: it also tells r to dial again.
  void probe_port(int r, bool nudge, std::function<void(bool)> done) {
    auto c = std::make_shared<Conn>(tcp::socket(io_));
    connect_to(r, c, [this, r, c, nudge, done = std::move(done)](boost::system::error_code ec) {
      if (!ec) handshake(r, c, kProbeBit | (nudge ? kNudgeBit : 0), [](const std::string&) {});
      done(ec == asio::error::connection_refused);
    });
  }

  // done(true) when r's host refuses a connection to r's process liveness port; false
  // when it accepts, cannot be reached, or r has none.
  void probe_liveness(int r, std::function<void(bool)> done) {
    if (static_cast<std::size_t>(r) >= livenesses_.size() || livenesses_[static_cast<std::size_t>(r)].empty())
      return done(false);
    const auto [host, port] = split_host_port(livenesses_[static_cast<std::size_t>(r)],
                                              "liveness port of rank " + std::to_string(r));
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(host, ec);
    if (ec) return done(false);
    auto c = std::make_shared<Conn>(tcp::socket(io_));
    auto timer = std::make_shared<asio::steady_timer>(io_, kConnectTimeout);
    timer->async_wait([c](boost::system::error_code e) {
      if (!e) close(c);
    });
    c->sock.async_connect(tcp::endpoint(addr, port), [c, timer, done = std::move(done)](boost::system::error_code e) {
      timer->cancel();
      close(c);
      done(e == asio::error::connection_refused);
    });
  }

  void attach(int r, const ConnPtr& c) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (p.conn && p.conn != c) close(p.conn);
    const bool first = !p.resumed && !p.broken && p.heard == Clock::time_point{};
    if (p.broken)
      log::info("control mesh: rank " + std::to_string(r) + " is connected again after " +
                seconds(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - *p.broken)) + " (" +
                p.broke_why + ")");
    tune(c->sock);
    p.conn = c;
    p.dialing = false;
    p.attempts = 0;
    p.resumed = false;
    p.broken.reset();
    p.out.clear();
    p.writing = false;
    p.heard = Clock::now();
    if (first) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        connected_[static_cast<std::size_t>(r)] = true;
        ++up_;
      }
      cv_.notify_all();
    }
    read_frame(c, [this, r, c](const Message& m) { return on_frame(r, c, m); },
               [this, r, c](const std::string& why) { on_broken(r, c, why); });
    Message resume;
    resume.set_kind(Message::RESUME);
    resume.set_ack(p.link.received());
    send(r, encode_frame(resume));
  }

  // Reads frames until on_frame returns false or the connection ends (on_end).
  template <class OnFrame>
  void read_frame(const ConnPtr& c, OnFrame on_frame, std::function<void(const std::string&)> on_end) {
    asio::async_read(c->sock, asio::buffer(c->header), [this, c, on_frame, on_end](boost::system::error_code ec, std::size_t) {
      if (ec) return on_end(sys::describe(ec));
      const std::uint32_t len = frame_length(c->header);
      if (len > kMaxControlFrame)
        return on_end("a frame claimed " + std::to_string(len) + " bytes, more than " + std::to_string(kMaxControlFrame));
      c->body.resize(len);
      asio::async_read(c->sock, asio::buffer(c->body), [this, c, on_frame, on_end](boost::system::error_code ec, std::size_t) {
        if (ec) return on_end(sys::describe(ec));
        Message m;
        if (!m.ParseFromString(c->body)) return on_end("a frame did not parse");
        if (on_frame(m)) read_frame(c, on_frame, on_end);
      });
    });
  }

  bool on_frame(int r, const ConnPtr& c, const Message& m) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (p.conn != c) return false;  // replaced meanwhile
    if (p.lost) return false;       // declared lost: whatever it says now comes too late
    p.heard = Clock::now();
    if (reliable(m.kind())) {
      switch (p.link.take(m.frame_seq())) {
        case MeshLink::Take::duplicate: return true;  // sent again after a reconnection
        case MeshLink::Take::gap:
          on_broken(r, c, "a frame numbered " + std::to_string(m.frame_seq()) + " came after " +
                              std::to_string(p.link.received()));
          return false;
        case MeshLink::Take::deliver: acknowledge(r); break;
      }
    }
    switch (m.kind()) {
      case Message::BEAT: return true;
      case Message::PING: {
        Message b;
        b.set_kind(Message::BEAT);
        send(r, encode_frame(b));
        return true;
      }
      case Message::ACK: p.link.acknowledged(m.ack()); return true;
      case Message::RESUME:
        // Everything the peer lacks goes again, before anything newer.
        for (auto& f : p.link.resume(m.ack())) p.out.push_back(std::move(f));
        p.resumed = true;
        send(r, "");
        return true;
      case Message::GOODBYE: p.gone = true; return true;
      case Message::PUT:
        if (!store(m.key(), m.value())) {
          declare_lost(r, "it put more into this rank's control table than the " +
                              std::to_string(kMaxControlTable >> 20) + " MiB allowed");
          return false;
        }
        return true;
      case Message::NOTICE: {
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
        declare_lost(r, "it sent an unexpected control frame");
        return false;
    }
  }

  // One acknowledgement for the reliable frames a read delivered together.
  void acknowledge(int r) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (p.ack_due) return;
    p.ack_due = true;
    asio::post(io_, [this, r] {
      auto& q = peers_[static_cast<std::size_t>(r)];
      q.ack_due = false;
      Message a;
      a.set_kind(Message::ACK);
      a.set_ack(q.link.received());
      send(r, encode_frame(a));
    });
  }

  // The connection to r ended, or stalled: not a death yet (class comment).
  void on_broken(int r, const ConnPtr& c, const std::string& why) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (p.conn != c) return;  // an old connection, already replaced
    close(c);
    p.conn.reset();
    p.out.clear();
    p.writing = false;
    p.resumed = false;
    if (p.gone || p.lost || leaving_) return;
    if (p.broken) return;  // a reconnection that failed: the attempts go on
    p.broken = Clock::now();
    p.broke_why = why;
    log::info("control mesh: the connection with rank " + std::to_string(r) + " broke (" + why + "); " +
              (r > rank_ ? "dialling it again" : "waiting for it to dial again"));
    reconnect(r, ++p.chain);
  }

  // One attempt now (the lower rank dials, the higher probes), the next one scheduled,
  // until the peer is connected again or lost (tick() judges the window).
  void reconnect(int r, unsigned chain) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (chain != p.chain || p.conn || p.lost || p.gone || leaving_ || !p.broken) return;
    if (r > rank_) redial(r);
    else probe(r);
    const auto delay = p.attempts++ < kQuickAttempts ? kQuickRetry : kSlowRetry;
    auto timer = std::make_shared<asio::steady_timer>(io_, delay);
    timer->async_wait([this, r, chain, timer](boost::system::error_code ec) {
      if (!ec) reconnect(r, chain);
    });
  }

  void declare_dead(int r) {
    declare_lost(r, "its control connection ended and its host refuses a new one: no process listens on its "
                    "control port any more (it exited or was killed)");
  }

  void mark_lost(int r) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    // One loss may be a partition's first sign: for two periods every peer is watched,
    // not only the ring neighbours, so that all it hides are found, not one by one as
    // their unwatched connections time out.
    if (timing_.heartbeat.count() > 0) alert_until_ = std::max(alert_until_, Clock::now() + 2 * timing_.heartbeat);
    p.lost = true;
    p.watched = false;
    if (p.conn) close(p.conn);
    p.conn.reset();
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
    if (peers_[static_cast<std::size_t>(r)].lost) return;
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

  // Heartbeats to the live ring neighbours, a beat on every connection idle for the
  // keepalive period, silences and broken connections judged. A neighbour newly watched
  // (the one before it was lost) gets a full period.
  void tick() {
    if (leaving_) return;
    const int n = static_cast<int>(peers_.size());
    const auto hb = timing_.heartbeat;
    auto live = [&](int r) { return !peers_[static_cast<std::size_t>(r)].lost && !peers_[static_cast<std::size_t>(r)].gone; };
    int prev = -1, next = -1;
    if (hb.count() > 0) {
      for (int k = 1; k < n && next < 0; ++k)
        if (live((rank_ + k) % n)) next = (rank_ + k) % n;
      for (int k = 1; k < n && prev < 0; ++k)
        if (live((rank_ - k + n) % n)) prev = (rank_ - k + n) % n;
    }
    const auto now = Clock::now();
    const bool alert = now < alert_until_;
    Message beat, ping;
    beat.set_kind(Message::BEAT);
    ping.set_kind(Message::PING);
    const std::string frame = encode_frame(beat), ping_frame = encode_frame(ping);
    for (int r = 0; r < n; ++r) {
      auto& p = peers_[static_cast<std::size_t>(r)];
      if (r == rank_ || p.lost || p.gone) continue;
      const bool neighbour = r == prev || r == next, watch = neighbour || alert;
      if (watch && now - p.beat >= hb / 4) {
        send(r, neighbour ? frame : ping_frame);  // a neighbour beats back by itself
        p.beat = now;
      } else if (timing_.keepalive.count() > 0 && p.conn && now - p.sent >= timing_.keepalive) {
        send(r, frame);
      }
      if (watch && !p.watched) p.heard = now;
      p.watched = watch;
      const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.heard);
      if (p.watched && silent > hb) {
        declare_lost(r, "silent on the control mesh for " + seconds(silent) + " (STRATA_HEARTBEAT_S=" + seconds(hb) +
                            "): its process is frozen, or its host or the network to it is gone");
        continue;
      }
      if (p.watched && p.conn && silent > hb / 2)
        on_broken(r, p.conn, "silent for " + seconds(silent) + ": the connection may have stalled");
      if (p.broken) {
        const auto down = std::chrono::duration_cast<std::chrono::milliseconds>(now - *p.broken);
        if (down > window_)
          declare_lost(r, "its control connection broke (" + p.broke_why + ") and could not be made again in " +
                              seconds(down) + ": its host or the network to it is gone");
      }
    }
    const auto period = hb.count() > 0 ? std::min(hb / 4, kTickAtMost) : kTickAtMost;
    tick_timer_.expires_after(period);
    tick_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) tick();
    });
  }

  void send_reliable(int r, Message m) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    m.set_frame_seq(p.link.next_seq());
    std::string frame = encode_frame(m);
    p.link.keep(frame);
    // Until the peer's RESUME says where it stands, the frame waits among the kept ones.
    if (p.conn && p.resumed) send(r, std::move(frame));
  }

  void send(int r, std::string frame) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (!frame.empty() && p.conn) p.out.push_back(std::move(frame));
    if (!p.conn || p.writing || p.out.empty()) return check_drained();
    p.writing = true;
    p.sent = Clock::now();
    auto c = p.conn;
    asio::async_write(c->sock, asio::buffer(p.out.front()), [this, r, c](boost::system::error_code ec, std::size_t) {
      auto& q = peers_[static_cast<std::size_t>(r)];
      if (q.conn != c) return check_drained();  // this connection was replaced: its queue went with it
      q.writing = false;
      q.out.pop_front();
      if (ec) return on_write_failed(r, c, sys::describe(ec));
      send(r, "");
    });
  }

  // A write fails once the peer has closed, often with its last frames (a notice, its
  // goodbye) still unread here: the read side reaches the end after them, so the write
  // side only makes sure the end is found if the read side somehow does not.
  void on_write_failed(int r, const ConnPtr& c, const std::string& why) {
    auto timer = std::make_shared<asio::steady_timer>(io_, kReadGrace);
    timer->async_wait([this, r, c, timer, why](boost::system::error_code) { on_broken(r, c, why); });
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

  static void close(const ConnPtr& c) {
    boost::system::error_code ec;
    c->sock.close(ec);
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
  MeshTiming timing_;
  std::chrono::milliseconds window_;  // how long a broken connection may take to come back
  std::vector<std::string> addresses_;
  std::vector<std::string> livenesses_;
  Clock::time_point dial_deadline_;
  Events events_;
  std::vector<std::function<void()>> early_;  // events before connect() returned
  bool leaving_ = false;
  Clock::time_point alert_until_;  // until then every peer is watched (mark_lost)
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
  // Per peer, why the last dial of it failed ("10.0.0.5:40001: Network is unreachable").
  std::vector<std::string> dial_errors_ = std::vector<std::string>(peers_.size());

  std::thread thread_;
};

ControlMesh::ControlMesh(int rank, int size, const std::string& bind_host, MeshTiming timing, const JobSecret& secret)
    : impl_(std::make_unique<Impl>(rank, size, bind_host, timing, secret)) {}
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
std::vector<int> ControlMesh::confirm_dead(const std::vector<int>& ranks, std::chrono::milliseconds budget) {
  return impl_->confirm_dead(ranks, budget);
}
void ControlMesh::connect(const std::vector<std::string>& addresses, Clock::time_point deadline, Events events,
                          std::vector<std::string> livenesses) {
  impl_->connect(addresses, deadline, std::move(events), std::move(livenesses));
}
void ControlMesh::broadcast(const ControlNotice& n) { impl_->broadcast(n); }
void ControlMesh::goodbye() { impl_->goodbye(); }

}  // namespace strata::bootstrap
