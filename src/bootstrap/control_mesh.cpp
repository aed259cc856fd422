#include "bootstrap/control_mesh.hpp"

#include <unistd.h>

#include <algorithm>
#include <future>
#include <utility>

#include "base/accept_loop.hpp"
#include "base/listener.hpp"
#include "bootstrap/mesh_impl.hpp"
#include "bootstrap/tcp_store.hpp"
#include "strata/errors.hpp"

namespace strata::bootstrap {

ControlMesh::Impl::Impl(int rank, int size, const std::string& bind_host, MeshTiming timing, const JobSecret& secret)
    : gate_("control mesh of rank " + std::to_string(rank), secret, auth::Channel::mesh, 4,
            auth::GateLimits{timing.handshake}),
      accept_trouble_("control mesh on rank " + std::to_string(rank)), rank_(rank),
      peers_(static_cast<std::size_t>(size)), links_(overlay_neighbours(rank, size, timing.full_upto)), seen_(size),
      timing_(timing), window_(timing.heartbeat.count() > 0 ? timing.heartbeat : kRedialWindow) {
  for (int r : links_) peers_[static_cast<std::size_t>(r)].linked = true;
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

ControlMesh::Impl::~Impl() {
  goodbye();
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

void ControlMesh::Impl::put(const std::string& key, const std::string& value, const std::vector<int>& to) {
  if (key.size() + value.size() + 64 > kMaxControlFrame)
    throw InvalidArgument("control mesh: the value of '" + key + "' is larger than a control frame");
  store(key, value);
  auto m = std::make_shared<Message>();
  m->set_kind(Message::PUT);
  m->set_key(key);
  m->set_value(value);
  asio::post(io_, [this, m, to] {
    std::vector<bool> wanted(peers_.size());
    bool direct = true;
    for (int r : to)
      if (r != rank_ && r >= 0 && r < static_cast<int>(peers_.size())) {
        wanted[static_cast<std::size_t>(r)] = true;
        direct = direct && peers_[static_cast<std::size_t>(r)].linked;
      }
    if (direct) {
      for (std::size_t r = 0; r < peers_.size(); ++r)
        if (wanted[r]) send_reliable(static_cast<int>(r), *m);
      return;
    }
    // Flooded: every rank sees it. Naming each rank that keeps it costs a frame that
    // grows with the job, so "everyone" (all ranks but this one and those it lost) is
    // said by naming none; a rank kept it that another took for lost costs nothing.
    bool everyone = true;
    for (std::size_t r = 0; r < peers_.size(); ++r)
      if (static_cast<int>(r) != rank_ && !wanted[r] && !peers_[r].lost) everyone = false;
    if (!everyone)
      for (std::size_t r = 0; r < peers_.size(); ++r)
        if (wanted[r]) m->add_to(static_cast<int>(r));
    flood(*m);
  });
}

std::vector<std::string> ControlMesh::Impl::wait(const std::vector<std::string>& keys, Clock::time_point deadline, const std::vector<int>& needed) {
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

void ControlMesh::Impl::forget(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& k : keys)
    if (const auto it = table_.find(k); it != table_.end()) {
      table_bytes_ -= k.size() + it->second.size();
      table_.erase(it);
    }
}

// Read on the mesh thread only (probe_liveness), so it is set there.
void ControlMesh::Impl::set_livenesses(std::vector<std::string> livenesses) {
  std::promise<void> done;
  asio::post(io_, [this, &livenesses, &done] {
    livenesses_ = std::move(livenesses);
    done.set_value();
  });
  done.get_future().wait();
}

std::vector<int> ControlMesh::Impl::confirm_dead(const std::vector<int>& ranks, std::chrono::milliseconds budget) {
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

void ControlMesh::Impl::connect(const std::vector<std::string>& addresses, Clock::time_point deadline, Events events,
                                std::vector<std::string> livenesses) {
  livenesses_ = std::move(livenesses);
  if (addresses.size() != peers_.size())
    throw InvalidArgument("control mesh: " + std::to_string(addresses.size()) + " addresses for " +
                          std::to_string(peers_.size()) + " ranks");
  asio::post(io_, [this, addresses, deadline] {
    addresses_ = addresses;
    dial_deadline_ = deadline;
    for (int r : links_)
      if (r > rank_) dial(r);
  });
  std::unique_lock<std::mutex> lock(mu_);
  const bool all = cv_.wait_until(lock, deadline, [&] { return up_ == links_.size() || !failed_.empty(); });
  if (!failed_.empty()) throw TransportError("control mesh on rank " + std::to_string(rank_) + ": " + failed_);
  if (!all) {
    std::string missing, unreachable;
    for (int l : links_) {
      const auto r = static_cast<std::size_t>(l);
      if (connected_[r]) continue;
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

void ControlMesh::Impl::broadcast(const ControlNotice& n) {
  auto m = std::make_shared<Message>();
  m->set_kind(Message::NOTICE);
  m->set_rank(n.from);
  m->set_code(n.code);
  m->set_seq(n.seq);
  for (int r : n.lost) m->add_lost(r);
  // Bounded so that the frame fits whatever limit a peer holds it to.
  m->set_text(n.text.substr(0, kMaxControlFrame / 2));
  asio::post(io_, [this, m] { flood(*m); });
}

void ControlMesh::Impl::goodbye() {
  if (said_goodbye_.exchange(true)) return;
  auto drained = std::make_shared<std::promise<void>>();
  auto future = drained->get_future();
  asio::post(io_, [this, drained] {
    leaving_ = true;
    Message m;
    m.set_kind(Message::GOODBYE);
    for (int r : links_)
      if (live(r)) send_reliable(r, m);
    on_drained_ = [drained] { drained->set_value(); };
    check_drained();
  });
  future.wait_for(std::chrono::seconds(1));
}

ControlMesh::ControlMesh(int rank, int size, const std::string& bind_host, MeshTiming timing, const JobSecret& secret)
    : impl_(std::make_unique<Impl>(rank, size, bind_host, timing, secret)) {}
ControlMesh::~ControlMesh() = default;
std::string ControlMesh::address() const { return impl_->address(); }
std::string ControlMesh::host() const { return impl_->host(); }
const std::vector<int>& ControlMesh::neighbours() const { return impl_->neighbours(); }
void ControlMesh::put(const std::string& key, const std::string& value, const std::vector<int>& to) {
  impl_->put(key, value, to);
}
std::vector<std::string> ControlMesh::wait(const std::vector<std::string>& keys, Clock::time_point deadline,
                                           const std::vector<int>& needed) {
  return impl_->wait(keys, deadline, needed);
}
void ControlMesh::forget(const std::vector<std::string>& keys) { impl_->forget(keys); }
void ControlMesh::set_livenesses(std::vector<std::string> livenesses) { impl_->set_livenesses(std::move(livenesses)); }
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
