// The control mesh's connections: accepting and dialling neighbours, the job's handshake,
// and, after one broke, dialling again or probing whether the peer's process is still there.

#include <cstring>
#include <utility>

#include "base/keepalive.hpp"
#include "base/log.hpp"
#include "bootstrap/mesh_impl.hpp"
#include "bootstrap/tcp_store.hpp"
#include "strata/errors.hpp"

namespace strata::bootstrap {

// Only a connection that proved it belongs to the job (auth_gate.hpp) may name a rank.
void ControlMesh::Impl::adopt(tcp::socket s) {
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
    if (claimed >= static_cast<std::uint32_t>(rank_) || peers_[claimed].lost || !peers_[claimed].linked) {
      gate_.refuse(remote(*c), "it claims rank " + std::to_string(claimed) +
                                   ", which is not a lower neighbour of this rank on the control mesh still taking part");
      c->sock.close(ec);
      return;
    }
    attach(static_cast<int>(claimed), c);
  });
}

void ControlMesh::Impl::tune(tcp::socket& s) {
  boost::system::error_code ec;
  s.set_option(tcp::no_delay(true), ec);
  // Unacknowledged for half the window: broken, and dialled again within the window.
  net::keep_alive(s.native_handle(), timing_.keepalive, std::max(window_ / 2, std::chrono::milliseconds(1000)));
}

std::optional<tcp::endpoint> ControlMesh::Impl::endpoint_of(int r) {
  const auto [host, port] =
      split_host_port(addresses_[static_cast<std::size_t>(r)], "control address of rank " + std::to_string(r));
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(host, ec);
  if (ec) return std::nullopt;
  return tcp::endpoint(addr, port);
}

// Connects to rank r's control port, giving up after kConnectTimeout; done(ec) once.
void ControlMesh::Impl::connect_to(int r, const ConnPtr& c, std::function<void(boost::system::error_code)> done) {
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
void ControlMesh::Impl::dial(int r) {
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

void ControlMesh::Impl::handshake(int r, const ConnPtr& c, std::uint32_t flags, std::function<void(const std::string&)> failed) {
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
void ControlMesh::Impl::redial(int r) {
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
void ControlMesh::Impl::probe(int r) {
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
void ControlMesh::Impl::probe_port(int r, bool nudge, std::function<void(bool)> done) {
  auto c = std::make_shared<Conn>(tcp::socket(io_));
  connect_to(r, c, [this, r, c, nudge, done = std::move(done)](boost::system::error_code ec) {
    if (!ec) handshake(r, c, kProbeBit | (nudge ? kNudgeBit : 0), [](const std::string&) {});
    done(ec == asio::error::connection_refused);
  });
}

// done(true) when r's host refuses a connection to r's process liveness port; false
// when it accepts, cannot be reached, or r has none.
void ControlMesh::Impl::probe_liveness(int r, std::function<void(bool)> done) {
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

void ControlMesh::Impl::attach(int r, const ConnPtr& c) {
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

// The connection to r ended, or stalled: not a death yet (class comment).
void ControlMesh::Impl::on_broken(int r, const ConnPtr& c, const std::string& why) {
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
void ControlMesh::Impl::reconnect(int r, unsigned chain) {
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

void ControlMesh::Impl::close(const ConnPtr& c) {
  boost::system::error_code ec;
  c->sock.close(ec);
}

void ControlMesh::Impl::fail_connect(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = why;
  }
  cv_.notify_all();
}

std::string ControlMesh::Impl::remote(const Conn& c) {
  boost::system::error_code ec;
  const auto ep = c.sock.remote_endpoint(ec);
  return ec ? "an unknown address" : ep.address().to_string() + ":" + std::to_string(ep.port());
}

}  // namespace strata::bootstrap
