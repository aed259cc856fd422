#include "listening_ports.hpp"
#include "traffic.hpp"

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

namespace strata::plugin_test {

namespace {

constexpr int kHandleBytes = 128;
constexpr int kPtrHost = 1;
constexpr unsigned char kSentinel = 0xA5;

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void expect_ok(int rc, const std::string& what) {
  if (rc != 0) throw std::runtime_error(what + " returned " + std::to_string(rc));
}

using Clock = std::chrono::steady_clock;

void check_deadline(Clock::time_point deadline, const std::string& what,
                    const std::atomic<bool>* stop = nullptr) {
  if (Clock::now() > deadline) throw std::runtime_error(what + ": timed out");
  if (stop && stop->load()) throw std::runtime_error(what + ": stopped, the other direction failed");
}

}  // namespace

void fill_pattern(char* buf, std::size_t n, std::uint64_t seed, std::uint64_t msg) {
  const std::uint64_t base = mix(seed ^ mix(msg));
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t w = mix(base + i);
    std::memcpy(buf + i, &w, 8);
  }
  if (i < n) {
    const std::uint64_t w = mix(base + i);
    std::memcpy(buf + i, &w, n - i);
  }
}

std::size_t check_pattern(const char* buf, std::size_t n, std::uint64_t seed, std::uint64_t msg) {
  const std::uint64_t base = mix(seed ^ mix(msg));
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t w = mix(base + i);
    const std::size_t len = std::min<std::size_t>(8, n - i);
    if (std::memcmp(buf + i, &w, len) != 0) {
      for (std::size_t k = 0; k < len; ++k)
        if (buf[i + k] != reinterpret_cast<const char*>(&w)[k]) return i + k;
    }
  }
  return n;
}

std::size_t Plan::bytes() const {
  std::size_t b = 0;
  for (const Msg& m : msgs) b += m.size;
  return b;
}

Plan make_plan(std::uint64_t seed, const PlanOptions& opt) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  Plan p;
  for (int i = 0; i < opt.messages; ++i) {
    Msg m;
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    if (u < 0.08) m.size = 0;
    else if (u < 0.25) m.size = uniform(1, 64);
    else if (u < 0.25 + opt.large_share) m.size = uniform((4u << 20) + 1, 9u << 20);
    else if (u < 0.45 + opt.large_share) m.size = uniform(64 << 10, 1 << 20);
    else m.size = uniform(65, opt.max_small);
    m.capacity = m.size + (uniform(0, 3) == 0 ? 0 : uniform(1, 4096));
    p.msgs.push_back(m);
  }
  for (int first = 0; first < opt.messages;) {
    Group g;
    g.first = first;
    g.n = static_cast<int>(std::min<std::size_t>(uniform(1, static_cast<std::size_t>(opt.max_group)),
                                                 static_cast<std::size_t>(opt.messages - first)));
    std::vector<int> tags;
    while (static_cast<int>(tags.size()) < g.n) {  // distinct within a group, like NCCL's ranks
      const int t = static_cast<int>(uniform(0, 4095));
      if (std::find(tags.begin(), tags.end(), t) == tags.end()) tags.push_back(t);
    }
    for (int k = 0; k < g.n; ++k) {
      p.msgs[static_cast<std::size_t>(first + k)].tag = tags[static_cast<std::size_t>(k)];
      g.send_order.push_back(k);
    }
    std::shuffle(g.send_order.begin(), g.send_order.end(), rng);
    p.groups.push_back(g);
    first += g.n;
  }
  return p;
}

Conn connect_pair(NetApi& net, Channel& ch, int dev, std::chrono::seconds timeout) {
  Conn c;
  expect_ok(net.init(&c.ctx), "init");
  char mine[kHandleBytes] = {}, theirs[kHandleBytes] = {};
  expect_ok(net.listen(c.ctx, dev, mine, &c.listen), "listen");
  if (!c.listen) throw std::runtime_error("listen returned success without a comm");
  ch.send(mine, sizeof mine);
  ch.recv(theirs, sizeof theirs);
  const auto deadline = Clock::now() + timeout;
  while (!c.send || !c.recv) {
    if (!c.send) expect_ok(net.connect(c.ctx, dev, theirs, &c.send), "connect");
    if (!c.recv) expect_ok(net.accept(c.listen, &c.recv), "accept");
    check_deadline(deadline, "connection setup");
    if (!c.send || !c.recv) std::this_thread::yield();
  }
  // Every stream the plugin holds is probed when idle (STRATA_KEEPALIVE_S). Checked
  // before any traffic, so no retransmit timer stands in for the keepalive one.
  const char* keepalive = std::getenv("STRATA_KEEPALIVE_S");
  const bool off = keepalive && std::string(keepalive) == "0";
  if (const auto bare = test::connections_without_keepalive(); !off && !bare.empty()) {
    std::string list;
    for (const auto& b : bare) list += " " + b;
    throw std::runtime_error("plugin connections without keepalive:" + list);
  }
  // With STRATA_PORT_RANGE, everything the plugin listens on by now (the listen port, the
  // rejoin port of a striped connection, UCX's) lies in it.
  if (const char* range = std::getenv("STRATA_PORT_RANGE"); range && *range) {
    const std::string r = range;
    const unsigned lo = static_cast<unsigned>(std::stoul(r)), hi = static_cast<unsigned>(std::stoul(r.substr(r.find('-') + 1)));
    const auto ports = test::listening_ports();
    if (ports.empty()) throw std::runtime_error("STRATA_PORT_RANGE=" + r + ": the plugin listens on no port");
    for (unsigned p : ports)
      if (p < lo || p > hi)
        throw std::runtime_error("STRATA_PORT_RANGE=" + r + ": the plugin listens on port " + std::to_string(p));
  }
  return c;
}

void close_conn(NetApi& net, Conn& c, const char* order) {
  for (const char* o = order; *o; ++o) {
    if (*o == 'l' && c.listen) expect_ok(net.close_listen(c.listen), "closeListen"), c.listen = nullptr;
    if (*o == 's' && c.send) expect_ok(net.close_send(c.send), "closeSend"), c.send = nullptr;
    if (*o == 'r' && c.recv) expect_ok(net.close_recv(c.recv), "closeRecv"), c.recv = nullptr;
  }
  expect_ok(net.finalize(c.ctx), "finalize");
  c.ctx = nullptr;
}

std::size_t drive_sends(NetApi& net, void* comm, const Plan& plan, std::uint64_t seed, const DriveOptions& opt) {
  struct Out {
    int msg;
    std::unique_ptr<char[]> data;
    void* mhandle = nullptr;
    void* request = nullptr;
  };
  std::vector<int> order;  // message indices in send order
  for (const Group& g : plan.groups)
    for (int k : g.send_order) order.push_back(g.first + k);

  std::deque<Out> in_flight;
  std::unique_ptr<Out> ready;  // prepared, not yet accepted by isend
  std::size_t next = 0, retries = 0;
  const auto deadline = Clock::now() + opt.timeout;
  while (next < order.size() || ready || !in_flight.empty()) {
    check_deadline(deadline, "sends", opt.stop);
    if (!ready && next < order.size() && in_flight.size() < opt.sends_in_flight) {
      ready = std::make_unique<Out>();
      ready->msg = order[next++];
      const Msg& m = plan.msgs[static_cast<std::size_t>(ready->msg)];
      ready->data.reset(new char[std::max<std::size_t>(m.size, 1)]);
      if (opt.verify) fill_pattern(ready->data.get(), m.size, seed, static_cast<std::uint64_t>(ready->msg));
      if (opt.register_memory)
        expect_ok(net.reg_mr(comm, ready->data.get(), m.size, kPtrHost, &ready->mhandle), "regMr");
    }
    if (ready) {
      const Msg& m = plan.msgs[static_cast<std::size_t>(ready->msg)];
      expect_ok(net.isend(comm, ready->data.get(), m.size, m.tag, ready->mhandle, &ready->request), "isend");
      if (ready->request) {
        in_flight.push_back(std::move(*ready));
        ready.reset();
        continue;  // post as many as the plugin takes before testing
      }
      ++retries;  // "retry later": test what is in flight, then try again
    }
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      int done = 0, size = -1;
      expect_ok(net.test(it->request, &done, &size), "test(send)");
      if (!done) {
        ++it;
        continue;
      }
      const Msg& m = plan.msgs[static_cast<std::size_t>(it->msg)];
      if (static_cast<std::size_t>(size) != m.size)
        throw std::runtime_error("send of message " + std::to_string(it->msg) + " reported " +
                                 std::to_string(size) + " bytes, sent " + std::to_string(m.size));
      if (it->mhandle) expect_ok(net.dereg_mr(comm, it->mhandle), "deregMr");
      it = in_flight.erase(it);
    }
  }
  return retries;
}

std::size_t drive_recvs(NetApi& net, void* comm, const Plan& plan, std::uint64_t seed, const DriveOptions& opt) {
  struct In {
    std::size_t group;
    std::vector<std::unique_ptr<char[]>> bufs;
    std::vector<void*> data, mhandles;
    std::vector<std::size_t> sizes;
    std::vector<int> tags;
    void* request = nullptr;
  };
  std::deque<In> in_flight;
  std::unique_ptr<In> ready;
  std::size_t next = 0, retries = 0;
  const auto deadline = Clock::now() + opt.timeout;
  while (next < plan.groups.size() || ready || !in_flight.empty()) {
    check_deadline(deadline, "receives", opt.stop);
    if (!ready && next < plan.groups.size() && in_flight.size() < opt.recvs_in_flight) {
      ready = std::make_unique<In>();
      ready->group = next++;
      const Group& g = plan.groups[ready->group];
      for (int k = 0; k < g.n; ++k) {
        const Msg& m = plan.msgs[static_cast<std::size_t>(g.first + k)];
        ready->bufs.emplace_back(new char[std::max<std::size_t>(m.capacity, 1)]);
        char* b = ready->bufs.back().get();
        if (opt.verify) std::memset(b + m.size, kSentinel, m.capacity - m.size);
        ready->data.push_back(b);
        ready->sizes.push_back(m.capacity);
        ready->tags.push_back(m.tag);
        void* mh = nullptr;
        if (opt.register_memory) expect_ok(net.reg_mr(comm, b, m.capacity, kPtrHost, &mh), "regMr");
        ready->mhandles.push_back(mh);
      }
    }
    if (ready) {
      expect_ok(net.irecv(comm, static_cast<int>(ready->data.size()), ready->data.data(),
                          ready->sizes.data(), ready->tags.data(), ready->mhandles.data(), &ready->request),
                "irecv");
      if (ready->request) {
        in_flight.push_back(std::move(*ready));
        ready.reset();
        continue;
      }
      ++retries;
    }
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      int done = 0;
      int sizes[64];
      std::fill(std::begin(sizes), std::end(sizes), -1);
      expect_ok(net.test(it->request, &done, sizes), "test(recv)");
      if (!done) {
        ++it;
        continue;
      }
      const Group& g = plan.groups[it->group];
      for (int k = 0; k < g.n; ++k) {
        const int msg = g.first + k;
        const Msg& m = plan.msgs[static_cast<std::size_t>(msg)];
        const std::string where = "message " + std::to_string(msg) + " (tag " + std::to_string(m.tag) +
                                  ", buffer " + std::to_string(k) + " of " + std::to_string(g.n) + ")";
        if (static_cast<std::size_t>(sizes[k]) != m.size)
          throw std::runtime_error(where + ": test reported " + std::to_string(sizes[k]) +
                                   " bytes, sent " + std::to_string(m.size));
        if (opt.verify) {
          const char* b = it->bufs[static_cast<std::size_t>(k)].get();
          const std::size_t bad = check_pattern(b, m.size, seed, static_cast<std::uint64_t>(msg));
          if (bad != m.size)
            throw std::runtime_error(where + ": byte " + std::to_string(bad) + " of " +
                                     std::to_string(m.size) + " differs");
          for (std::size_t i = m.size; i < m.capacity; ++i)
            if (static_cast<unsigned char>(b[i]) != kSentinel)
              throw std::runtime_error(where + ": byte " + std::to_string(i) + " past the message was written");
        }
        if (it->mhandles[static_cast<std::size_t>(k)])
          expect_ok(net.dereg_mr(comm, it->mhandles[static_cast<std::size_t>(k)]), "deregMr");
      }
      it = in_flight.erase(it);
    }
  }
  return retries;
}

void exchange(NetApi& net, Conn& c, int role, const PlanOptions& popt, const DriveOptions& dopt,
              std::uint64_t seed) {
  // Each direction has its own plan and pattern seed, derived from the sender's role.
  const std::uint64_t out_seed = seed * 2 + static_cast<std::uint64_t>(role);
  const std::uint64_t in_seed = seed * 2 + static_cast<std::uint64_t>(1 - role);
  const Plan out = make_plan(out_seed, popt), in = make_plan(in_seed, popt);
  std::atomic<bool> failed{false};
  DriveOptions opt = dopt;
  opt.stop = &failed;
  std::exception_ptr send_error;
  std::thread sender([&] {
    try {
      drive_sends(net, c.send, out, out_seed, opt);
    } catch (...) {
      send_error = std::current_exception();
      failed = true;
    }
  });
  std::exception_ptr recv_error;
  try {
    drive_recvs(net, c.recv, in, in_seed, opt);
  } catch (...) {
    recv_error = std::current_exception();
    failed = true;
  }
  sender.join();
  if (recv_error) std::rethrow_exception(recv_error);
  if (send_error) std::rethrow_exception(send_error);
}

}  // namespace strata::plugin_test
