// The job's handshake (handshake.hpp) over an Asio stream, for every listener and dialer
// of the job: a plain socket, or TLS (wan/). A connection that has not proved itself owns
// nothing: it only counts against its listener's limit of pending handshakes, and it is
// closed when its deadline passes. Refusals are logged with the peer's address, a few
// lines and then one per thousand, so that a flood does not flood the log too.
//
// One Gate per listener, used only from the thread that runs its io_context. Callbacks
// hold the gate's shared state, not the gate, so a gate may go before its handlers.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/asio.hpp"
#include "base/log.hpp"
#include "bootstrap/handshake.hpp"

namespace strata::bootstrap::auth {

struct GateLimits {
  std::chrono::milliseconds deadline{10000};  // to finish the handshake (STRATA_HANDSHAKE_S)
  std::size_t max_pending = 256;              // handshakes under way; more are closed at once
};

class Gate {
 public:
  // who: "tcp transport of rank 3", for the log. payload_bytes: what dialers prove.
  Gate(std::string who, const JobSecret& secret, Channel channel, std::size_t payload_bytes,
       GateLimits limits = {})
      : st_(std::make_shared<State>(State{std::move(who), secret, channel, payload_bytes, limits})) {}

  // Runs the acceptor's side on a new connection; on_admit(payload) once it proved itself.
  template <class Stream, class OnAdmit>
  void admit(std::shared_ptr<Stream> s, OnAdmit on_admit) {
    auto st = st_;
    const std::string from = peer_of(*s);
    if (st->pending >= st->limits.max_pending) {
      st->refuse(from, std::to_string(st->pending) + " handshakes are already under way");
      close(*s);
      return;
    }
    ++st->pending;
    auto op = std::make_shared<AcceptOp>(*st, s->get_executor(), from);
    arm(st, op, s, [st, from] { st->refuse(from, "it did not prove itself within the deadline"); });
    start_tls(*s, true, [st, op, s, on_admit](boost::system::error_code ec) mutable {
      if (op->done) return;
      if (ec) return finish_refused(st, op, *s, "TLS handshake failed (" + describe_tls(ec) + ")");
      read_hello(st, op, s, std::move(on_admit));
    });
  }

  // Runs the dialer's side on a connected stream; done("") once the listener proved
  // itself and was sent this side's proof, else done(why) with the stream closed.
  template <class Stream, class OnDone>
  void dial(std::shared_ptr<Stream> s, Bytes payload, OnDone done) {
    auto st = st_;
    const std::string to = peer_of(*s);
    auto op = std::make_shared<DialOp>(*st, std::move(payload), s->get_executor());
    auto shared_done = std::make_shared<OnDone>(std::move(done));
    auto fail = [op, s, shared_done](const std::string& why) {
      if (op->done) return;
      op->done = true;
      op->timer.cancel();
      close(*s);
      (*shared_done)(why);
    };
    op->timer.expires_after(st->limits.deadline);
    op->timer.async_wait([fail, to, st](boost::system::error_code ec) {
      if (!ec) fail(to + " did not answer the job's handshake within " + std::to_string(st->limits.deadline.count()) + " ms");
    });
    start_tls(*s, false, [op, s, fail, to, shared_done](boost::system::error_code ec) {
      if (op->done) return;
      if (ec) return fail("TLS handshake with " + to + " failed (" + describe_tls(ec) + ")");
      write_hello(op, s, fail, to, shared_done);
    });
  }

  // Logs a refusal (rate-limited); for a listener's own checks after the handshake.
  void refuse(const std::string& from, const std::string& why) { st_->refuse(from, why); }
  std::uint64_t refused() const { return st_->refused; }
  std::size_t pending() const { return st_->pending; }

  template <class Stream>
  static std::string peer_of(Stream& s) {
    boost::system::error_code ec;
    const auto ep = s.lowest_layer().remote_endpoint(ec);
    return ec ? std::string("an unknown address") : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

 private:
  struct State;
  struct AcceptOp;
  struct DialOp;

  // A stream that has a TLS layer (wan/wan_socket.hpp) runs its handshake first, under
  // the same deadline; a plain socket goes straight on.
  template <class Stream, class Handler>
  static void start_tls(Stream& s, bool server, Handler h) {
    if constexpr (requires { s.async_handshake(server, h); }) s.async_handshake(server, std::move(h));
    else boost::asio::post(s.get_executor(), [h = std::move(h)]() mutable { h(boost::system::error_code()); });
  }
  static std::string describe_tls(const boost::system::error_code& ec) {
    std::string m = ec.message();
    return m.empty() ? ec.category().name() : m;
  }
  // In TLS 1.3 the dialer finishes its handshake before the listener has checked the
  // dialer's certificate, so a refusal arrives as an alert on the first read.
  static std::string dial_error(const std::string& to, const boost::system::error_code& ec) {
    if (std::string(ec.category().name()) == "asio.ssl")
      return "TLS handshake with " + to + " failed (" + describe_tls(ec) + "; the listener refused this side's credentials)";
    return to + " closed the connection during the job's handshake (" + ec.message() +
           "): it does not know this job's secret, or is not a strata listener";
  }

  template <class Stream, class OnAdmit>
  static void read_hello(std::shared_ptr<State> st, std::shared_ptr<AcceptOp> op, std::shared_ptr<Stream> s, OnAdmit on_admit) {
    boost::asio::async_read(*s, boost::asio::buffer(op->hello), [st, op, s, on_admit](boost::system::error_code ec, std::size_t) mutable {
      if (op->done) return;
      if (ec) return finish_refused(st, op, *s, "it closed before its hello (" + ec.message() + ")");
      auto challenge = op->acceptor.challenge(op->hello);
      if (!challenge) return finish_refused(st, op, *s, op->acceptor.why());
      op->challenge = *challenge;
      boost::asio::async_write(*s, boost::asio::buffer(op->challenge), [st, op, s, on_admit](boost::system::error_code ec, std::size_t) mutable {
        if (op->done) return;
        if (ec) return finish_refused(st, op, *s, "it closed before the challenge (" + ec.message() + ")");
        op->proof.resize(op->acceptor.proof_bytes());
        boost::asio::async_read(*s, boost::asio::buffer(op->proof), [st, op, s, on_admit](boost::system::error_code ec, std::size_t) mutable {
          if (op->done) return;
          if (ec) return finish_refused(st, op, *s, "it closed before its proof (" + ec.message() + ")");
          auto payload = op->acceptor.verify(op->proof);
          if (!payload) return finish_refused(st, op, *s, op->acceptor.why());
          finish(st, op);
          on_admit(std::move(*payload));
        });
      });
    });
  }

  template <class Stream, class Fail, class Done>
  static void write_hello(std::shared_ptr<DialOp> op, std::shared_ptr<Stream> s, Fail fail, std::string to, Done shared_done) {
    boost::asio::async_write(*s, boost::asio::buffer(op->dialer.hello()), [op, s, fail, to, shared_done](boost::system::error_code ec, std::size_t) {
      if (op->done) return;
      if (ec) return fail(dial_error(to, ec));
      boost::asio::async_read(*s, boost::asio::buffer(op->challenge), [op, s, fail, to, shared_done](boost::system::error_code ec, std::size_t) {
        if (op->done) return;
        if (ec) return fail(dial_error(to, ec));
        auto proof = op->dialer.answer(op->challenge);
        if (!proof) return fail("refused " + to + ": " + op->dialer.why());
        op->proof = std::move(*proof);
        boost::asio::async_write(*s, boost::asio::buffer(op->proof), [op, s, fail, to, shared_done](boost::system::error_code ec, std::size_t) {
          if (op->done) return;
          if (ec) return fail(dial_error(to, ec));
          op->done = true;
          op->timer.cancel();
          (*shared_done)(std::string());
        });
      });
    });
  }

  struct State {
    std::string who;
    JobSecret secret;
    Channel channel;
    std::size_t payload_bytes;
    GateLimits limits;
    std::size_t pending = 0;
    std::uint64_t refused = 0;
    void refuse(const std::string& from, const std::string& why) {
      ++refused;
      if (refused <= 3 || refused % 1000 == 0)
        log::warn(who + ": refused a connection from " + from + ": " + why + " (" + std::to_string(refused) +
                  " refused so far)");
    }
  };
  struct AcceptOp {
    AcceptOp(const State& st, boost::asio::any_io_executor ex, std::string f)
        : acceptor(st.secret, st.channel, st.payload_bytes), timer(ex), from(std::move(f)) {}
    Acceptor acceptor;
    std::array<unsigned char, kHelloBytes> hello{};
    std::array<unsigned char, kChallengeBytes> challenge{};
    Bytes proof;
    boost::asio::steady_timer timer;
    std::string from;
    bool done = false;
  };
  struct DialOp {
    DialOp(const State& st, Bytes payload, boost::asio::any_io_executor ex)
        : dialer(st.secret, st.channel, std::move(payload)), timer(ex) {}
    Dialer dialer;
    std::array<unsigned char, kChallengeBytes> challenge{};
    Bytes proof;
    boost::asio::steady_timer timer;
    bool done = false;
  };

  template <class Stream>
  static void close(Stream& s) {
    boost::system::error_code ec;
    s.lowest_layer().close(ec);
  }
  template <class Stream, class OnExpiry>
  static void arm(const std::shared_ptr<State>& st, const std::shared_ptr<AcceptOp>& op, const std::shared_ptr<Stream>& s,
                  OnExpiry on_expiry) {
    op->timer.expires_after(st->limits.deadline);
    op->timer.async_wait([st, op, s, on_expiry](boost::system::error_code ec) {
      if (ec || op->done) return;
      op->done = true;
      --st->pending;
      on_expiry();
      close(*s);
    });
  }
  static void finish(const std::shared_ptr<State>& st, const std::shared_ptr<AcceptOp>& op) {
    op->done = true;
    op->timer.cancel();
    --st->pending;
  }
  template <class Stream>
  static void finish_refused(const std::shared_ptr<State>& st, const std::shared_ptr<AcceptOp>& op, Stream& s,
                             const std::string& why) {
    finish(st, op);
    st->refuse(op->from, why);
    close(s);
  }

  std::shared_ptr<State> st_;
};

}  // namespace strata::bootstrap::auth
