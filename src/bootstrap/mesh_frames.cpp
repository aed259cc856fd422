// The control mesh's frames: what arrives on a connection, the reliable frames and their
// acknowledgements, floods passed on along the overlay, the key-value table, writing.

#include <algorithm>
#include <utility>

#include "bootstrap/mesh_impl.hpp"

namespace strata::bootstrap {

bool ControlMesh::Impl::on_frame(int r, const ConnPtr& c, const Message& m) {
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
    if (m.origin_seq() != 0) {
      // Flooded: the first arrival is passed on and taken, any other dropped.
      if (!seen_.first(m.origin(), m.origin_seq())) return true;
      relay(r, m);
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
      if (m.origin_seq() != 0 && m.to_size() > 0 && std::find(m.to().begin(), m.to().end(), rank_) == m.to().end())
        return true;  // passed on, not kept here
      if (!store(m.key(), m.value())) {
        declare_lost(r, "it put more into this rank's control table than the " +
                            std::to_string(kMaxControlTable >> 20) + " MiB allowed");
        return false;
      }
      return true;
    case Message::NOTICE: {
      ControlNotice n;
      // A connection of the job's says who sent it: the peer, or the flood's origin.
      n.from = m.origin_seq() != 0 ? m.origin() : r;
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
void ControlMesh::Impl::acknowledge(int r) {
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

// Thread-safe; false when the table is full.
bool ControlMesh::Impl::store(const std::string& key, const std::string& value) {
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

void ControlMesh::Impl::deliver(std::function<void()> f) {
  if (leaving_) return;  // the owner is going away: nobody to tell
  if (events_.lost || events_.notice) f();
  else early_.push_back(std::move(f));
}

// A frame for ranks this one may hold no connection with: numbered as this rank's
// next flood and sent on every link; each rank passes it on (relay).
void ControlMesh::Impl::flood(Message m) {
  if (leaving_) return;
  m.set_origin(rank_);
  m.set_origin_seq(++flooded_);
  seen_.first(rank_, flooded_);  // its echo is dropped
  for (int r : links_)
    if (live(r)) send_reliable(r, m);
}

// A flood seen here for the first time goes on along every link but the one it came
// by (and its origin's): a rank whose links to the origin broke still hears it.
void ControlMesh::Impl::relay(int from, const Message& m) {
  if (leaving_) return;
  for (int r : links_)
    if (r != from && r != m.origin() && live(r)) send_reliable(r, m);
}

void ControlMesh::Impl::send_reliable(int r, Message m) {
  auto& p = peers_[static_cast<std::size_t>(r)];
  m.set_frame_seq(p.link.next_seq());
  std::string frame = encode_frame(m);
  p.link.keep(frame);
  // Until the peer's RESUME says where it stands, the frame waits among the kept ones.
  if (p.conn && p.resumed) send(r, std::move(frame));
}

void ControlMesh::Impl::send(int r, std::string frame) {
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
void ControlMesh::Impl::on_write_failed(int r, const ConnPtr& c, const std::string& why) {
  auto timer = std::make_shared<asio::steady_timer>(io_, kReadGrace);
  timer->async_wait([this, r, c, timer, why](boost::system::error_code) { on_broken(r, c, why); });
}

void ControlMesh::Impl::check_drained() {
  if (!on_drained_) return;
  for (const auto& p : peers_)
    if (p.writing) return;
  for (auto& p : peers_) {
    boost::system::error_code ec;
    if (p.conn) p.conn->sock.shutdown(tcp::socket::shutdown_send, ec);
  }
  std::exchange(on_drained_, nullptr)();
}

}  // namespace strata::bootstrap
