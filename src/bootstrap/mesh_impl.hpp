// The control mesh's insides (control_mesh.hpp is the interface), shared by the files
// that implement it: control_mesh.cpp (what its owner calls), mesh_connections.cpp
// (dialling, accepting, redialling and probing peers), mesh_frames.cpp (frames in and
// out, floods and the key-value table) and mesh_watch.cpp (heartbeats, silences, losses).
// Everything but the calls from control_mesh.cpp runs on the mesh's own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/asio.hpp"
#include "base/sys_errors.hpp"
#include "bootstrap.pb.h"
#include "bootstrap/auth_gate.hpp"
#include "bootstrap/control_mesh.hpp"
#include "bootstrap/mesh_link.hpp"
#include "bootstrap/mesh_overlay.hpp"
#include "bootstrap/store_protocol.hpp"

namespace strata::bootstrap {

namespace mesh {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Message = wire::ControlMessage;

// Without heartbeats, how long a broken connection may take to come back before its peer
// is lost (a peer whose process is gone is found at once regardless).
inline constexpr std::chrono::milliseconds kRedialWindow{10000};
// How often the mesh looks at its peers: beats, idle beats, silences, broken connections.
inline constexpr std::chrono::milliseconds kTickAtMost{250};
// A dial or a probe that has not connected by then is tried again later.
inline constexpr std::chrono::milliseconds kConnectTimeout{1000};
// Attempts to reconnect (or probe) a broken peer: a few quick ones first, since a dying
// process may still hold its port for a moment, then two a second.
inline constexpr int kQuickAttempts = 10;
inline constexpr std::chrono::milliseconds kQuickRetry{50}, kSlowRetry{500};
inline constexpr std::chrono::milliseconds kReadGrace{200};  // on_write_failed
// How long the higher rank of a broken pair waits for the lower to dial before nudging it.
inline constexpr std::chrono::milliseconds kNudgeAfter{1000};
// The handshake payload names the dialling rank; this bit marks a probe, which only asks
// whether a process still listens here and is closed at once, and with the nudge bit also
// says that the prober's side of their connection broke: a middlebox that forgot a flow
// may have reset one side only, and only the lower rank dials.
inline constexpr std::uint32_t kProbeBit = 1u << 31, kNudgeBit = 1u << 30;

inline std::string seconds(std::chrono::milliseconds d) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return s;
}

// What to check when ranks cannot reach each other across regions.
inline constexpr const char* kReachHint =
    "a rank behind NAT needs STRATA_ADVERTISE_ADDR (the address other regions reach it at), and a firewall "
    "between regions must let through STRATA_PORT_RANGE (set it on every rank to ports it opens)";

inline bool reliable(Message::Kind k) {
  return k == Message::NOTICE || k == Message::PUT || k == Message::GOODBYE;
}

}  // namespace mesh

using namespace mesh;  // this header is the mesh's own, included by its files only

class ControlMesh::Impl {
 public:
  // control_mesh.cpp: ControlMesh's calls, from any thread.
  Impl(int rank, int size, const std::string& bind_host, MeshTiming timing, const JobSecret& secret);
  ~Impl();
  std::string address() const { return host() + ":" + std::to_string(acceptor_.local_endpoint().port()); }
  std::string host() const { return published_.to_string(); }
  const std::vector<int>& neighbours() const { return links_; }
  void put(const std::string& key, const std::string& value, const std::vector<int>& to);
  std::vector<std::string> wait(const std::vector<std::string>& keys, Clock::time_point deadline,
                                const std::vector<int>& needed);
  void forget(const std::vector<std::string>& keys);
  void set_livenesses(std::vector<std::string> livenesses);
  std::vector<int> confirm_dead(const std::vector<int>& ranks, std::chrono::milliseconds budget);
  void connect(const std::vector<std::string>& addresses, Clock::time_point deadline, Events events,
               std::vector<std::string> livenesses);
  void broadcast(const ControlNotice& n);
  void goodbye();

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
    bool linked = false;     // one of this rank's neighbours on the overlay
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

  // mesh_connections.cpp
  void adopt(tcp::socket s);
  void tune(tcp::socket& s);
  std::optional<tcp::endpoint> endpoint_of(int r);
  void connect_to(int r, const ConnPtr& c, std::function<void(boost::system::error_code)> done);
  void dial(int r);
  void handshake(int r, const ConnPtr& c, std::uint32_t flags, std::function<void(const std::string&)> failed);
  void redial(int r);
  void probe(int r);
  void probe_port(int r, bool nudge, std::function<void(bool)> done);
  void probe_liveness(int r, std::function<void(bool)> done);
  void attach(int r, const ConnPtr& c);
  void on_broken(int r, const ConnPtr& c, const std::string& why);
  void reconnect(int r, unsigned chain);
  static void close(const ConnPtr& c);
  void fail_connect(const std::string& why);
  static std::string remote(const Conn& c);

  // mesh_frames.cpp
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

  bool on_frame(int r, const ConnPtr& c, const Message& m);
  void acknowledge(int r);
  bool store(const std::string& key, const std::string& value);  // thread-safe
  void deliver(std::function<void()> f);
  void flood(Message m);
  void relay(int from, const Message& m);
  void send_reliable(int r, Message m);
  void send(int r, std::string frame);
  void on_write_failed(int r, const ConnPtr& c, const std::string& why);
  void check_drained();

  // mesh_watch.cpp
  void tick();
  void declare_dead(int r);
  void mark_lost(int r);
  void declare_lost(int r, const std::string& why);

  bool live(int r) const {
    const auto& p = peers_[static_cast<std::size_t>(r)];
    return !p.lost && !p.gone;
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
  std::vector<int> links_;  // the ranks this one holds connections with (mesh_overlay.hpp)
  FloodSeen seen_;
  std::uint64_t flooded_ = 0;  // this rank's floods so far
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
  std::size_t up_ = 0;  // links connected once
  std::string failed_;
  // Per peer, why the last dial of it failed ("10.0.0.5:40001: Network is unreachable").
  std::vector<std::string> dial_errors_ = std::vector<std::string>(peers_.size());

  std::thread thread_;
};

}  // namespace strata::bootstrap
