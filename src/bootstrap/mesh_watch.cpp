// The control mesh's watch on its peers: heartbeats to ring neighbours, beats on idle
// connections, silences and broken connections judged, losses declared.

#include <algorithm>

#include "base/log.hpp"
#include "bootstrap/mesh_impl.hpp"

namespace strata::bootstrap {

void ControlMesh::Impl::declare_dead(int r) {
  declare_lost(r, "its control connection ended and its host refuses a new one: no process listens on its "
                  "control port any more (it exited or was killed)");
}

void ControlMesh::Impl::mark_lost(int r) {
  auto& p = peers_[static_cast<std::size_t>(r)];
  // One loss may be a partition's first sign: for two periods every linked peer is
  // watched, not only the ring neighbours, so that all it hides are found, not one by one
  // as their unwatched connections time out (and named to the rest by flooded notices).
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

void ControlMesh::Impl::declare_lost(int r, const std::string& why) {
  if (peers_[static_cast<std::size_t>(r)].lost) return;
  mark_lost(r);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (up_ < links_.size()) failed_ = "rank " + std::to_string(r) + " was lost while connecting: " + why;
  }
  cv_.notify_all();
  deliver([this, r, why] {
    if (events_.lost) events_.lost(r, why);
  });
}

// Heartbeats to the live ring neighbours, a beat on every connection idle for the
// keepalive period, silences and broken connections judged. A neighbour newly watched
// (the one before it was lost) gets a full period.
void ControlMesh::Impl::tick() {
  if (leaving_) return;
  const int n = static_cast<int>(peers_.size());
  const auto hb = timing_.heartbeat;
  // The nearest live neighbours along the ring each way; past a lost one, the next
  // linked rank (the overlay links r ± 1, 2, 4, ...).
  auto beats_with = [&](int r) { return live(r) && peers_[static_cast<std::size_t>(r)].linked; };
  int prev = -1, next = -1;
  if (hb.count() > 0) {
    for (int k = 1; k < n && next < 0; ++k)
      if (beats_with((rank_ + k) % n)) next = (rank_ + k) % n;
    for (int k = 1; k < n && prev < 0; ++k)
      if (beats_with((rank_ - k + n) % n)) prev = (rank_ - k + n) % n;
  }
  const auto now = Clock::now();
  const bool alert = now < alert_until_;
  Message beat, ping;
  beat.set_kind(Message::BEAT);
  ping.set_kind(Message::PING);
  const std::string frame = encode_frame(beat), ping_frame = encode_frame(ping);
  for (int r : links_) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    if (p.lost || p.gone) continue;
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

}  // namespace strata::bootstrap
