// strata-wan-router: the delay line of the WAN lab (bench/wan/netns.sh).
//
// The router namespace sends every packet it forwards between two regions to an NFQUEUE
// queue of its own per ordered pair; this program holds each packet for that pair's
// one-way delay (plus jitter that never reorders) and then lets the kernel forward it.
// The packet never leaves the kernel: the queue hands over its metadata only (no payload
// copy), takes GSO packets whole (a 64 KiB TSO burst is one entry, not 45), and a
// verdict releases every packet of a queue up to an id at once. Packets of one queue are
// released in arrival order, so one batch verdict per queue and wake-up suffices; that
// keeps the router far from being the bottleneck of a 1 Gbit/s link on two cores.
//
// Both ends' TCP stacks thus see the real round trip (unlike a delay added inside a
// process after TCP has delivered), and the loss the lab drops as packets enter the router
// (router/lab_loss.c) meets their loss recovery.
#include <arpa/inet.h>  // before the kernel's headers, which would define in_addr again
#include <libmnl/libmnl.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "strata-wan-router: error: %s\n", what.c_str());
  std::exit(1);
}

// One ordered pair of regions: its queue, its delay, and the packets it holds.
struct Line {
  std::uint16_t queue = 0;
  std::int64_t delay_ns = 0, jitter_ns = 0;
  struct Held {
    std::uint32_t id;
    std::int64_t due;
  };
  std::deque<Held> held;
  std::int64_t last_due = 0;  // jittered packets never overtake the one before
  std::uint64_t packets = 0, bytes = 0, max_held = 0;
  double delay_sum_ms = 0;  // of the delays applied, for the mean in the stats
};

struct Options {
  std::vector<Line> lines;
  double lifetime_s = 3600;
  std::string ready_file, stats_file;
  bool realtime = false;
  std::uint32_t queue_max = 1u << 18;
  // Releases are batched: the router wakes at most once per quantum, so at a packet rate
  // of 100k/s it does not pay a wake-up and a verdict per packet. Packets go up to one
  // quantum late, which is small beside the delays it emulates.
  std::int64_t quantum_ns = 200'000;
};

double parse_number(const std::string& s, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno != 0 || !(v >= 0) || v > 1e9)
    die(what + " must be a non-negative number, got '" + s + "'");
  return v;
}

// Q:DELAY_US[:JITTER_US]
Line parse_line(const std::string& spec) {
  std::vector<std::string> f;
  std::size_t from = 0;
  for (;;) {
    const auto colon = spec.find(':', from);
    f.push_back(spec.substr(from, colon - from));
    if (colon == std::string::npos) break;
    from = colon + 1;
  }
  if (f.size() < 2 || f.size() > 3) die("--queue must be Q:DELAY_US[:JITTER_US], got '" + spec + "'");
  Line l;
  const double q = parse_number(f[0], "queue number in '" + spec + "'");
  if (q > 65535 || q != double(std::uint16_t(q))) die("queue number must be 0..65535, got '" + f[0] + "'");
  l.queue = static_cast<std::uint16_t>(q);
  l.delay_ns = static_cast<std::int64_t>(parse_number(f[1], "delay in '" + spec + "'") * 1000);
  if (f.size() == 3) l.jitter_ns = static_cast<std::int64_t>(parse_number(f[2], "jitter in '" + spec + "'") * 1000);
  if (l.jitter_ns > l.delay_ns) die("jitter may not exceed the delay in '" + spec + "'");
  return l;
}

void usage() {
  std::fprintf(stderr,
               "usage: strata-wan-router --queue Q:DELAY_US[:JITTER_US]... [--lifetime S] [--ready FILE]\n"
               "                         [--stats FILE] [--realtime] [--queue-max PACKETS] [--quantum-us US]\n"
               "Holds the packets of each NFQUEUE queue Q for DELAY_US microseconds (± JITTER_US,\n"
               "never reordered) and then accepts them; exits after --lifetime seconds (3600)\n"
               "or on SIGTERM/SIGINT, writing per-queue counts to --stats as JSON. Releases are\n"
               "batched: at most one wake-up per --quantum-us (200).\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--queue") o.lines.push_back(parse_line(value()));
    else if (a == "--lifetime") o.lifetime_s = parse_number(value(), "--lifetime");
    else if (a == "--ready") o.ready_file = value();
    else if (a == "--stats") o.stats_file = value();
    else if (a == "--realtime") o.realtime = true;
    else if (a == "--queue-max") o.queue_max = static_cast<std::uint32_t>(parse_number(value(), "--queue-max"));
    else if (a == "--quantum-us") o.quantum_ns = static_cast<std::int64_t>(parse_number(value(), "--quantum-us") * 1000);
    else if (a == "-h" || a == "--help") usage();
    else die("unknown argument '" + a + "' (--help)");
  }
  if (o.lines.empty()) die("at least one --queue is needed");
  std::map<int, int> seen;
  for (const auto& l : o.lines)
    if (seen[l.queue]++) die("queue " + std::to_string(l.queue) + " given twice");
  if (o.lifetime_s <= 0) die("--lifetime must be positive");
  return o;
}

class Netlink {
 public:
  Netlink() {
    nl_ = mnl_socket_open(NETLINK_NETFILTER);
    if (!nl_) die(std::string("cannot open a netfilter netlink socket: ") + std::strerror(errno));
    if (mnl_socket_bind(nl_, 0, MNL_SOCKET_AUTOPID) < 0) die(std::string("cannot bind netlink: ") + std::strerror(errno));
    port_ = mnl_socket_get_portid(nl_);
    const int fd = mnl_socket_get_fd(nl_);
    // A router that falls behind must not lose packet notices silently: a big buffer, and
    // a lost notice is harmless anyway (the next batch verdict releases its packet too).
    int big = 64 << 20, on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) != 0)
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &on, sizeof on);
  }
  ~Netlink() { mnl_socket_close(nl_); }
  int fd() const { return mnl_socket_get_fd(nl_); }

  void bind_queue(const Line& l, std::uint32_t queue_max) {
    std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
    nlmsghdr* nlh = nfq_nlmsg_put(buf.data(), NFQNL_MSG_CONFIG, l.queue);
    nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND);
    request(nlh, "bind queue " + std::to_string(l.queue) + " (is another router holding it?)");
    nlh = nfq_nlmsg_put(buf.data(), NFQNL_MSG_CONFIG, l.queue);
    nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_META, 0);  // metadata only: no payload copy
    nfq_nlmsg_cfg_put_qmaxlen(nlh, queue_max);
    // Whole GSO packets (the kernel would otherwise segment them before queueing).
    mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(NFQA_CFG_F_GSO));
    mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(NFQA_CFG_F_GSO));
    request(nlh, "configure queue " + std::to_string(l.queue));
  }

  // Appends one batch verdict (accept every packet of `queue` up to `id`) to `out`.
  static void add_release(std::vector<char>& out, std::uint16_t queue, std::uint32_t id) {
    const std::size_t at = out.size();
    out.resize(at + MNL_ALIGN(sizeof(nlmsghdr)) + 64);
    nlmsghdr* nlh = nfq_nlmsg_put(out.data() + at, NFQNL_MSG_VERDICT_BATCH, queue);
    nfq_nlmsg_verdict_put(nlh, static_cast<int>(id), NF_ACCEPT);
    out.resize(at + nlh->nlmsg_len);
  }
  void send(const std::vector<char>& msgs) {
    if (msgs.empty()) return;
    if (mnl_socket_sendto(nl_, msgs.data(), msgs.size()) < 0)
      die(std::string("cannot send verdicts: ") + std::strerror(errno));
  }

 private:
  // Sends a configuration message and waits for the kernel's acknowledgement.
  void request(nlmsghdr* nlh, const std::string& what) {
    nlh->nlmsg_flags |= NLM_F_ACK;
    const std::uint32_t seq = ++seq_;
    nlh->nlmsg_seq = seq;
    if (mnl_socket_sendto(nl_, nlh, nlh->nlmsg_len) < 0) die("cannot " + what + ": " + std::strerror(errno));
    std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
    for (;;) {
      const ssize_t n = mnl_socket_recvfrom(nl_, buf.data(), buf.size());
      if (n < 0) die("cannot " + what + ": " + std::strerror(errno));
      const int r = mnl_cb_run(buf.data(), static_cast<std::size_t>(n), seq, port_, nullptr, nullptr);
      if (r < 0) die("cannot " + what + ": " + std::strerror(errno));
      if (r == MNL_CB_STOP) return;
    }
  }

  mnl_socket* nl_ = nullptr;
  unsigned port_ = 0;
  std::uint32_t seq_ = 0;
};

class Router {
 public:
  explicit Router(Options o) : o_(std::move(o)), rng_(std::random_device{}()) {
    for (std::size_t i = 0; i < o_.lines.size(); ++i) index_[o_.lines[i].queue] = i;
  }

  void run() {
    for (const auto& l : o_.lines) nl_.bind_queue(l, o_.queue_max);
    if (o_.realtime) {
      // Delays are timed by this process: it must run when a release is due, not when the
      // ranks on the same cores let it. It sleeps between packets, so it takes little.
      sched_param p{};
      p.sched_priority = 10;
      if (sched_setscheduler(0, SCHED_FIFO, &p) != 0)
        std::fprintf(stderr, "strata-wan-router: warning: no real-time priority (%s)\n", std::strerror(errno));
    }
    if (!o_.ready_file.empty()) std::ofstream(o_.ready_file) << getpid() << "\n";
    const std::int64_t end = now_ns() + static_cast<std::int64_t>(o_.lifetime_s * 1e9);
    constexpr int kBatch = 64;
    std::vector<std::vector<char>> bufs(kBatch, std::vector<char>(4096));
    std::vector<iovec> iov(kBatch);
    std::vector<mmsghdr> msgs(kBatch);
    std::int64_t released = 0;
    while (!g_stop) {
      std::int64_t now = now_ns();
      if (now >= end) {
        std::fprintf(stderr, "strata-wan-router: lifetime of %.0f s is over; stopping\n", o_.lifetime_s);
        break;
      }
      if (now >= released + o_.quantum_ns) {
        release(now);
        released = now;
      }
      std::int64_t wake = std::min(end, now + 100'000'000);  // re-check the stop flag
      for (const auto& l : o_.lines)
        if (!l.held.empty()) wake = std::min(wake, std::max(l.held.front().due, released + o_.quantum_ns));
      pollfd pfd{nl_.fd(), POLLIN, 0};
      const std::int64_t wait = std::max<std::int64_t>(0, wake - now);
      const timespec ts{static_cast<time_t>(wait / 1'000'000'000), static_cast<long>(wait % 1'000'000'000)};
      const int r = ppoll(&pfd, 1, &ts, nullptr);
      if (r < 0 && errno != EINTR) die(std::string("poll: ") + std::strerror(errno));
      if (r <= 0) continue;
      for (;;) {
        for (int i = 0; i < kBatch; ++i) {
          iov[i] = {bufs[i].data(), bufs[i].size()};
          msgs[i] = {};
          msgs[i].msg_hdr.msg_iov = &iov[i];
          msgs[i].msg_hdr.msg_iovlen = 1;
        }
        const int got = recvmmsg(nl_.fd(), msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
        if (got < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
          if (errno == ENOBUFS) continue;  // notices lost; their packets go with the next batch
          die(std::string("receive: ") + std::strerror(errno));
        }
        now = now_ns();
        for (int i = 0; i < got; ++i) take(bufs[i].data(), msgs[i].msg_len, now);
        if (got < kBatch) break;
      }
    }
    release(std::numeric_limits<std::int64_t>::max());  // what is held goes on its way
    write_stats();
  }

 private:
  static int on_attr(const nlattr* a, void* data) {
    const auto** tb = static_cast<const nlattr**>(data);
    const int type = mnl_attr_get_type(a);
    if (mnl_attr_type_valid(a, NFQA_MAX) >= 0) tb[type] = a;
    return MNL_CB_OK;
  }

  // A datagram of packet notices (one or several netlink messages).
  void take(const char* buf, std::size_t size, std::int64_t now) {
    int len = static_cast<int>(size);
    for (auto* nlh = reinterpret_cast<const nlmsghdr*>(buf); mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
      if (nlh->nlmsg_type == NLMSG_ERROR || nlh->nlmsg_type == NLMSG_DONE) continue;
      const nlattr* tb[NFQA_MAX + 1] = {};
      if (mnl_attr_parse(nlh, sizeof(nfgenmsg), on_attr, tb) < 0 || !tb[NFQA_PACKET_HDR]) continue;
      const auto* g = static_cast<const nfgenmsg*>(mnl_nlmsg_get_payload(nlh));
      const auto it = index_.find(ntohs(g->res_id));
      if (it == index_.end()) continue;
      Line& l = o_.lines[it->second];
      const auto* ph = static_cast<const nfqnl_msg_packet_hdr*>(mnl_attr_get_payload(tb[NFQA_PACKET_HDR]));
      std::int64_t d = l.delay_ns;
      if (l.jitter_ns > 0) d += std::uniform_int_distribution<std::int64_t>(-l.jitter_ns, l.jitter_ns)(rng_);
      const std::int64_t due = std::max(l.last_due, now + d);
      l.last_due = due;
      l.held.push_back({ntohl(ph->packet_id), due});
      l.max_held = std::max<std::uint64_t>(l.max_held, l.held.size());
      ++l.packets;
      l.delay_sum_ms += double(due - now) / 1e6;
      if (tb[NFQA_CAP_LEN]) l.bytes += ntohl(mnl_attr_get_u32(tb[NFQA_CAP_LEN]));
    }
  }

  void release(std::int64_t now) {
    out_.clear();
    for (auto& l : o_.lines) {
      if (l.held.empty() || l.held.front().due > now) continue;
      std::uint32_t last = 0;
      while (!l.held.empty() && l.held.front().due <= now) {
        last = l.held.front().id;
        l.held.pop_front();
      }
      Netlink::add_release(out_, l.queue, last);
    }
    nl_.send(out_);
  }

  void write_stats() const {
    if (o_.stats_file.empty()) return;
    std::ofstream f(o_.stats_file);
    f << "{\"queues\": [";
    for (std::size_t i = 0; i < o_.lines.size(); ++i) {
      const Line& l = o_.lines[i];
      f << (i ? ", " : "") << "{\"queue\": " << l.queue << ", \"delay_us\": " << l.delay_ns / 1000
        << ", \"jitter_us\": " << l.jitter_ns / 1000 << ", \"packets\": " << l.packets << ", \"bytes\": " << l.bytes
        << ", \"max_held\": " << l.max_held
        << ", \"mean_delay_ms\": " << (l.packets ? l.delay_sum_ms / double(l.packets) : 0.0) << "}";
    }
    f << "]}\n";
  }

  Options o_;
  Netlink nl_;
  std::map<std::uint16_t, std::size_t> index_;
  std::mt19937_64 rng_;
  std::vector<char> out_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  try {
    Router(std::move(o)).run();
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
