#include "netns.hpp"
#include "cases.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>

#include "bootstrap/handshake.hpp"
#include "handle.hpp"  // the plugin's wire structs, to play a broken peer
#include "case_support.hpp"
#include "pair.hpp"
#include "plugin_api.hpp"
#include "traffic.hpp"

namespace strata::plugin_test {

namespace {

using namespace std::chrono_literals;
constexpr int kPtrHost = 1, kPtrCuda = 2;

bool has_non_loopback_interface() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i; i = i->ifa_next)
    if ((i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK) && i->ifa_addr &&
        i->ifa_addr->sa_family == AF_INET)
      found = true;
  freeifaddrs(list);
  return found;
}

}  // namespace

bool case_exports(const CaseArgs& a) {
  return run_isolated(
      [&] {
        for (int v = 8; v <= 11; ++v) {
          EXPECT(exports_version(a.plugin, v));
          auto net = load_plugin(a.plugin, v);
          EXPECT(std::strcmp(net->name(), "strata") == 0);
        }
        EXPECT(!exports_version(a.plugin, 7));  // NCCL falls back in order: v11 first
        EXPECT(!exports_version(a.plugin, 12));
        return 0;
      },
      setup(a), kTimeout);
}

bool case_devices(const CaseArgs& a) {
  bool pass = true;
  // The selected interface: every property tells the truth the README promises.
  pass &= run_isolated(
      [&] {
        auto net = load_plugin(a.plugin, a.version);
        void* ctx = nullptr;
        ok(net->init(&ctx), "init");
        int n = -1;
        ok(net->devices(&n), "devices");
        EXPECT(n >= 1);
        Props p;
        ok(net->properties(0, &p), "getProperties");
        EXPECT(p.name == a.interface);
        EXPECT(p.speed > 0);
        EXPECT(p.latency >= 0);
        EXPECT(p.max_recvs > 1);
        EXPECT(p.ptr_support == kPtrHost);
        EXPECT(p.reg_is_global == 1);
        EXPECT(p.max_comms > 0);
        EXPECT(p.device_type == 0 && p.device_version == 0);
        if (a.version >= 9) EXPECT(p.max_p2p_bytes >= (std::size_t{9} << 20) && p.vdev_count == 1);
        if (a.version >= 11) EXPECT(p.max_multi_request_size == 1);
        EXPECT(net->properties(n, &p) != 0);
        EXPECT(net->properties(-1, &p) != 0);
        ok(net->finalize(ctx), "finalize");
        return 0;
      },
      setup(a), kTimeout);
  // Overrides for what sysfs cannot know.
  pass &= run_isolated(
      [&] {
        auto net = load_plugin(a.plugin, a.version);
        void* ctx = nullptr;
        ok(net->init(&ctx), "init");
        Props p;
        ok(net->properties(0, &p), "getProperties");
        EXPECT(p.speed == 12345);
        EXPECT(static_cast<int>(p.latency) == 250);
        return 0;
      },
      setup(a, "", {{"STRATA_NET_SPEED_MBPS", "12345"}, {"STRATA_NET_LATENCY_US", "250"}}), kTimeout);
  // No interface matches: zero devices, so NCCL moves on to its next network.
  pass &= run_isolated(
      [&] {
        auto net = load_plugin(a.plugin, a.version);
        void* ctx = nullptr;
        ok(net->init(&ctx), "init");
        int n = -1;
        ok(net->devices(&n), "devices");
        EXPECT(n == 0);
        return 0;
      },
      setup(a, "", {{"STRATA_NET_IF", "no-such-if"}}), kTimeout);
  // Automatic choice: loopback only when nothing else is up.
  pass &= run_isolated(
      [&] {
        auto net = load_plugin(a.plugin, a.version);
        void* ctx = nullptr;
        ok(net->init(&ctx), "init");
        int n = -1;
        ok(net->devices(&n), "devices");
        EXPECT(n >= 1);
        const bool other = has_non_loopback_interface();
        for (int d = 0; d < n; ++d) {
          Props p;
          ok(net->properties(d, &p), "getProperties");
          EXPECT((p.name == "lo") == !other);
        }
        return 0;
      },
      setup(a, "", {{"STRATA_NET_IF", ""}}), kTimeout);
  // A malformed setting fails init with an error code, not a crash.
  pass &= run_isolated(
      [&] {
        auto net = load_plugin(a.plugin, a.version);
        void* ctx = nullptr;
        EXPECT(net->init(&ctx) != 0);
        EXPECT(ctx == nullptr);
        ok(net->finalize(ctx), "finalize after a failed init");
        return 0;
      },
      setup(a, "", {{"STRATA_WAN_STREAMS", "many"}}), kTimeout);
  return pass;
}

bool case_misuse(const CaseArgs& a) {
  return run_isolated(
      [&] {
        auto net = load_plugin(a.plugin, a.version);
        int n = -1;
        EXPECT(net->devices(&n) != 0);  // before init
        void* ctx = nullptr;
        ok(net->init(&ctx), "init");
        EXPECT(net->devices(nullptr) != 0);
        ok(net->devices(&n), "devices");
        EXPECT(net->properties(0, nullptr) != 0);
        EXPECT(net->properties(n + 5, nullptr) != 0);

        char handle[128] = {};
        void* comm = reinterpret_cast<void*>(0x1);
        EXPECT(net->listen(ctx, n + 5, handle, &comm) != 0 && comm == nullptr);
        EXPECT(net->listen(ctx, 0, nullptr, &comm) != 0);
        EXPECT(net->connect(ctx, 0, nullptr, &comm) != 0);
        EXPECT(net->connect(ctx, 0, handle, &comm) != 0 && comm == nullptr);  // all zero
        std::mt19937 rng(7);
        for (char& c : handle) c = static_cast<char>(rng());
        EXPECT(net->connect(ctx, 0, handle, &comm) != 0 && comm == nullptr);  // garbage

        alignas(16) char junk[512] = {};
        void* request = reinterpret_cast<void*>(0x1);
        int done = 0, size = 0;
        EXPECT(net->accept(nullptr, &comm) != 0);
        EXPECT(net->accept(junk, &comm) != 0);
        char byte = 0;
        std::size_t one = 1;
        int tag = 0;
        void* data = &byte;
        EXPECT(net->isend(nullptr, &byte, 1, 0, nullptr, &request) != 0 && request == nullptr);
        EXPECT(net->isend(junk, &byte, 1, 0, nullptr, &request) != 0);
        EXPECT(net->irecv(nullptr, 1, &data, &one, &tag, nullptr, &request) != 0);
        EXPECT(net->test(nullptr, &done, &size) != 0);
        EXPECT(net->test(junk, &done, &size) != 0);
        void* mh = nullptr;
        EXPECT(net->reg_mr(nullptr, &byte, 1, kPtrCuda, &mh) != 0 && mh == nullptr);
        ok(net->reg_mr(nullptr, &byte, 1, kPtrHost, &mh), "regMr(host)");
        ok(net->dereg_mr(nullptr, mh), "deregMr");
        ok(net->close_send(nullptr), "closeSend(nullptr)");

        // A live connection to ourselves for the misuse that needs real comms.
        void* lc = nullptr;
        std::memset(handle, 0, sizeof handle);
        ok(net->listen(ctx, 0, handle, &lc), "listen");
        EXPECT(net->connect(ctx, n + 5, handle, &comm) != 0);  // valid handle, unknown device
        void *sc = nullptr, *rc = nullptr;
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (!sc || !rc) {
          if (!sc) ok(net->connect(ctx, 0, handle, &sc), "connect");
          if (!rc) ok(net->accept(lc, &rc), "accept");
          EXPECT(std::chrono::steady_clock::now() < deadline);
        }
        EXPECT(net->close_send(lc) != 0);  // wrong kind of comm
        EXPECT(net->close_recv(sc) != 0);
        EXPECT(net->close_listen(rc) != 0);

        Props p;
        ok(net->properties(0, &p), "getProperties");
        std::vector<void*> datas(static_cast<std::size_t>(p.max_recvs) + 1, &byte);
        std::vector<std::size_t> sizes(datas.size(), 1);
        std::vector<int> tags(datas.size());
        for (std::size_t i = 0; i < tags.size(); ++i) tags[i] = static_cast<int>(i);
        EXPECT(net->irecv(rc, 0, datas.data(), sizes.data(), tags.data(), nullptr, &request) != 0);
        EXPECT(net->irecv(rc, p.max_recvs + 1, datas.data(), sizes.data(), tags.data(), nullptr, &request) != 0);
        tags[1] = tags[0];
        EXPECT(net->irecv(rc, 2, datas.data(), sizes.data(), tags.data(), nullptr, &request) != 0);
        EXPECT(net->isend(sc, nullptr, 16, 0, nullptr, &request) != 0);  // null buffer with bytes
        const std::size_t huge = a.version == 8 ? std::size_t{INT_MAX} : std::size_t{1} << 40;
        EXPECT(net->isend(sc, &byte, huge, 0, nullptr, &request) != 0);  // beyond maxP2pBytes

        // The comms still work after all that.
        char out[100], in[100] = {};
        for (int i = 0; i < 100; ++i) out[i] = static_cast<char>(i);
        void* sreq = nullptr;
        void* rreq = nullptr;
        void* inp = in;
        std::size_t cap = sizeof in;
        int t = 3;
        ok(net->isend(sc, out, sizeof out, 3, nullptr, &sreq), "isend");
        ok(net->irecv(rc, 1, &inp, &cap, &t, nullptr, &rreq), "irecv");
        EXPECT(sreq && rreq);
        int sdone = 0, rdone = 0, ssize = -1, rsize = -1;
        while (!sdone || !rdone) {
          if (!sdone) ok(net->test(sreq, &sdone, &ssize), "test(send)");
          if (!rdone) ok(net->test(rreq, &rdone, &rsize), "test(recv)");
          EXPECT(std::chrono::steady_clock::now() < deadline);
        }
        EXPECT(ssize == 100 && rsize == 100 && std::memcmp(in, out, 100) == 0);
        EXPECT(net->test(sreq, &done, &size) != 0);  // finished requests are gone

        // A message larger than its receive buffer is an error on test, never an overrun.
        char small[10];
        std::memset(small, 0x5A, sizeof small);
        void* smallp = small;
        std::size_t small_cap = 4;
        ok(net->isend(sc, out, sizeof out, 3, nullptr, &sreq), "isend");
        ok(net->irecv(rc, 1, &smallp, &small_cap, &t, nullptr, &rreq), "irecv");
        int rcode = 0;
        for (rdone = 0; rcode == 0 && !rdone;) {
          rcode = net->test(rreq, &rdone, &rsize);
          EXPECT(std::chrono::steady_clock::now() < deadline);
        }
        EXPECT(rcode != 0);
        for (int i = 4; i < 10; ++i) EXPECT(small[i] == 0x5A);
        ok(net->close_send(sc), "closeSend");
        ok(net->close_recv(rc), "closeRecv");
        ok(net->close_listen(lc), "closeListen");
        ok(net->finalize(ctx), "finalize");
        return 0;
      },
      setup(a), kTimeout);
}

namespace {

// STRATA_NET_INTRA as the children will see it: --env first, else the harness's own.
std::string intra_path(const CaseArgs& a) {
  for (const auto& [k, v] : a.env)
    if (k == "STRATA_NET_INTRA") return v;
  const char* v = std::getenv("STRATA_NET_INTRA");
  return v ? v : "";
}

}  // namespace

bool case_transfer(const CaseArgs& a) {
  const char* expect = intra_path(a) == "tcp" ? "direct TCP (same region)" : "UCX (same region)";
  return traffic_case(a, setup(a, "dc-1"), setup(a, "dc-1"), PlanOptions{}, {expect});
}

bool case_crossregion(const CaseArgs& a) {
  return crossregion_case(a, {{"STRATA_WAN_STREAMS", "4"}, {"STRATA_WAN_STRIPE_BYTES", "65536"}}, 150,
                          PlanOptions{}.large_share, {"striped (another region)"});
}

bool case_crossregion_delay(const CaseArgs& a) {
  return crossregion_case(a, {{"STRATA_WAN_STREAMS", "3"}, {"STRATA_WAN_EMULATE", "delay=2ms,window=256k"}}, 80,
                          0.03, {"striped (another region)"});
}

// Stream 0 of each direction is cut once mid-transfer (after 5 frames): the receiver
// redials it, the sender resends what was not acknowledged (under the emulated delay,
// frames the receiver holds but has not acknowledged too: those it drops), and every
// byte still arrives, verified. Whether any resend is a duplicate depends on timing, so
// only the redial is required of the log.
bool case_crossregion_cut(const CaseArgs& a) {
  return crossregion_case(a,
                          {{"STRATA_WAN_STREAMS", "3"},
                           {"STRATA_WAN_STRIPE_BYTES", "65536"},
                           {"STRATA_WAN_EMULATE", "cut=5,delay=10ms"}},
                          120, 0.05, {"redialled"});
}

// Two regions, each behind NAT and a firewall that admits only STRATA_PORT_RANGE
// (NetnsPair::behind_nat): each side listens on its private address and advertises its
// public one (STRATA_ADVERTISE_ADDR), which the other side dials; stream 0 is cut once,
// and the receiver redials it through the sender's public address and rejoin port.
bool case_crossregion_nat(const CaseArgs& a) {
  if (const auto why = test::NetnsPair::unavailable(); !why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return true;
  }
  const test::NetnsPair net;
  const std::string range = "17300-17363";
  net.behind_nat(0, "17300:17363");
  net.behind_nat(1, "17300:17363");
  auto peer = [&](int side, const char* region) {
    PeerSetup s = setup(a, region,
                        {{"STRATA_NET_IF", "priv0"},
                         {"STRATA_PORT_RANGE", range},
                         {"STRATA_ADVERTISE_ADDR", net.address(side)},
                         {"STRATA_WAN_STREAMS", "3"},
                         {"STRATA_WAN_STRIPE_BYTES", "65536"},
                         {"STRATA_WAN_EMULATE", "cut=5"}});
    s.netns = net.name(side);
    return s;
  };
  PlanOptions popt;
  popt.messages = 80;
  popt.large_share = 0.05;
  return traffic_case(a, peer(0, "us-east"), peer(1, "eu-west"), popt, {"striped (another region)", "redialled"});
}

// Two regions with a middlebox that forgets a flow idle for 2 s and then drops its packets
// silently (NetnsPair::forget_idle_flows; MeshLinks' tests show it forgetting the flows
// of a job without keepalive). Traffic, 3.5 s of silence, traffic again, all verified:
// with STRATA_KEEPALIVE_S=1 the streams' probes keep every flow known and none breaks.
// (Without keepalive a silently forgotten flow stalls the plugin: its sender ends the
// stream after 5 s unacknowledged, but only the receiver redials, and it hears nothing.)
bool case_crossregion_idle(const CaseArgs& a) {
  if (const auto why = test::NetnsPair::unavailable(); !why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return true;
  }
  const test::NetnsPair net;
  net.forget_idle_flows(2s, test::NetnsPair::Forget::silently);
  auto peer = [&](int side, const char* region) {
    PeerSetup s = setup(a, region,
                        {{"STRATA_NET_IF", net.interface(side)},
                         {"STRATA_KEEPALIVE_S", "1"},
                         {"STRATA_WAN_STREAMS", "2"},
                         {"STRATA_WAN_STRIPE_BYTES", "65536"}});
    s.netns = net.name(side);
    return s;
  };
  PlanOptions popt;
  popt.messages = 40;
  popt.large_share = 0.05;
  return run_pair(
      [&](int role, Channel& ch) {
        auto plugin = load_plugin(a.plugin, a.version);
        Conn c = connect_pair(*plugin, ch, 0, 30s);
        exchange(*plugin, c, role, popt, DriveOptions{}, 0x1D1E);
        ch.sync();
        std::this_thread::sleep_for(3500ms);
        ch.sync();
        exchange(*plugin, c, role, popt, DriveOptions{}, 0x1D1F);
        ch.sync();
        close_conn(*plugin, c, role == 0 ? "lsr" : "rsl");
        if (logged(" broke ("))
          throw Failure("a stream broke while idle (keepalive did not keep the middlebox from forgetting it): " +
                        logged_line(" broke ("));
        return 0;
      },
      peer(0, "us-east"), peer(1, "eu-west"), 90s);
}

// NCCL may have NCCL_NET_MAX_REQUESTS x maxRecvs sends in flight on one comm before any
// completes, and 32 grouped receives of maxRecvs buffers.
bool case_limits(const CaseArgs& a) {
  return run_pair(
      [&](int role, Channel& ch) {
        auto net = load_plugin(a.plugin, a.version);
        Conn c = connect_pair(*net, ch, 0, 30s);
        Props p;
        ok(net->properties(0, &p), "getProperties");
        const int per_group = p.max_recvs, groups = 32, total = per_group * groups;
        constexpr std::size_t kBytes = 3000;
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        if (role == 0) {
          std::vector<std::vector<char>> bufs(static_cast<std::size_t>(total) + 1);
          std::vector<void*> reqs;
          for (int i = 0; i <= total; ++i) {
            auto& b = bufs[static_cast<std::size_t>(i)];
            b.resize(kBytes);
            fill_pattern(b.data(), b.size(), 99, static_cast<std::uint64_t>(i));
          }
          for (int i = 0; i < total; ++i) {
            void* r = nullptr;
            ok(net->isend(c.send, bufs[static_cast<std::size_t>(i)].data(), kBytes, i % per_group, nullptr, &r),
               "isend");
            EXPECT(r != nullptr);  // all of NCCL's in-flight sends are accepted at once
            reqs.push_back(r);
          }
          void* extra = nullptr;
          ok(net->isend(c.send, bufs.back().data(), kBytes, 0, nullptr, &extra), "isend beyond the limit");
          EXPECT(extra == nullptr);  // "retry later", not an error
          ch.sync();
          for (void* r : reqs) {
            int done = 0, size = 0;
            while (!done) {
              ok(net->test(r, &done, &size), "test(send)");
              EXPECT(std::chrono::steady_clock::now() < deadline);
            }
            EXPECT(size == static_cast<int>(kBytes));
          }
          while (!extra) {
            ok(net->isend(c.send, bufs.back().data(), kBytes, 0, nullptr, &extra), "isend (retry)");
            EXPECT(std::chrono::steady_clock::now() < deadline);
          }
          for (int done = 0, size = 0; !done;) ok(net->test(extra, &done, &size), "test(send)");
        } else {
          ch.sync();  // every send is posted before the first receive
          std::vector<std::vector<char>> bufs(static_cast<std::size_t>(total) + 1, std::vector<char>(kBytes + 10));
          std::vector<void*> reqs;
          std::vector<int> tags(static_cast<std::size_t>(per_group));
          for (int k = 0; k < per_group; ++k) tags[static_cast<std::size_t>(k)] = per_group - 1 - k;  // reversed
          for (int g = 0; g <= groups; ++g) {
            const int n = g < groups ? per_group : 1;
            std::vector<void*> data;
            std::vector<std::size_t> sizes(static_cast<std::size_t>(n), kBytes + 10);
            for (int k = 0; k < n; ++k) data.push_back(bufs[static_cast<std::size_t>(g * per_group + k)].data());
            int last_tag = 0;
            void* r = nullptr;
            ok(net->irecv(c.recv, n, data.data(), sizes.data(), n == 1 ? &last_tag : tags.data(), nullptr, &r),
               "irecv");
            EXPECT(r != nullptr);
            reqs.push_back(r);
          }
          for (int g = 0; g <= groups; ++g) {
            int done = 0, sizes[64] = {};
            while (!done) {
              ok(net->test(reqs[static_cast<std::size_t>(g)], &done, sizes), "test(recv)");
              EXPECT(std::chrono::steady_clock::now() < deadline);
            }
            const int n = g < groups ? per_group : 1;
            for (int k = 0; k < n; ++k) {
              EXPECT(sizes[k] == static_cast<int>(kBytes));
              // Buffer k has tag per_group-1-k, so it holds the send with that tag.
              const int sent = g < groups ? g * per_group + (per_group - 1 - k) : total;
              EXPECT(check_pattern(bufs[static_cast<std::size_t>(g * per_group + k)].data(), kBytes, 99,
                                   static_cast<std::uint64_t>(sent)) == kBytes);
            }
          }
        }
        ch.sync();
        close_conn(*net, c);
        return 0;
      },
      setup(a), setup(a), kTimeout);
}

bool case_close(const CaseArgs& a) {
  return run_pair(
      [&](int role, Channel& ch) {
        auto net = load_plugin(a.plugin, a.version);
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        PlanOptions small;
        small.messages = 20;
        small.large_share = 0;
        // 1. Traffic, then idle comms closed in every order across repeated connections.
        const char* orders[] = {"lsr", "lrs", "slr", "srl", "rls", "rsl"};
        for (int i = 0; i < 6; ++i) {
          Conn c = connect_pair(*net, ch, 0, 30s);
          exchange(*net, c, role, small, DriveOptions{}, static_cast<std::uint64_t>(i));
          ch.sync();
          close_conn(*net, c, orders[role == 0 ? i : 5 - i]);
        }
        // 2. The peer closes while we are idle: our next receive and send fail, never hang.
        {
          Conn c = connect_pair(*net, ch, 0, 30s);
          ch.sync();
          if (role == 0) {
            close_conn(*net, c, "srl");
            ch.sync();
          } else {
            ch.sync();
            char buf[16];
            void* data = buf;
            std::size_t cap = sizeof buf;
            int tag = 0, done = 0, size = 0, rc = 0;
            void* r = nullptr;
            rc = net->irecv(c.recv, 1, &data, &cap, &tag, nullptr, &r);
            while (rc == 0 && !done) {
              EXPECT(r != nullptr);
              rc = net->test(r, &done, &size);
              EXPECT(std::chrono::steady_clock::now() < deadline);
            }
            EXPECT(rc == kRemoteError);
            // Sends may be accepted by the kernel at first; the broken pipe shows up soon.
            rc = 0;
            while (rc == 0) {
              void* s = nullptr;
              rc = net->isend(c.send, buf, sizeof buf, 0, nullptr, &s);
              for (done = 0; rc == 0 && s && !done;) rc = net->test(s, &done, &size);
              EXPECT(std::chrono::steady_clock::now() < deadline);
            }
            EXPECT(rc != 0);
            close_conn(*net, c, "rsl");  // closing failed comms is clean
          }
        }
        // 3. A listener closed before anyone connects: connect fails, never hangs.
        {
          void* ctx = nullptr;
          ok(net->init(&ctx), "init");
          char handle[128] = {};
          if (role == 0) {
            void* lc = nullptr;
            ok(net->listen(ctx, 0, handle, &lc), "listen");
            void* rc = reinterpret_cast<void*>(0x1);
            ok(net->accept(lc, &rc), "accept with nobody connecting");
            EXPECT(rc == nullptr);
            ok(net->close_listen(lc), "closeListen");
            ch.send(handle, sizeof handle);
            ch.sync();
          } else {
            ch.recv(handle, sizeof handle);
            void* sc = nullptr;
            int rc = 0;
            while (rc == 0 && !sc) {
              rc = net->connect(ctx, 0, handle, &sc);
              EXPECT(std::chrono::steady_clock::now() < deadline);
            }
            EXPECT(rc != 0 && sc == nullptr);
            ch.sync();
          }
          ok(net->finalize(ctx), "finalize");
        }
        return 0;
      },
      setup(a), setup(a), kTimeout);
}

namespace {

// A plain TCP connection to the listener a handle names: a peer that speaks only part of
// the protocol.
int raw_connect(const char* handle) {
  nccl_net::ListenHandle h;
  std::memcpy(&h, handle, sizeof h);
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (h.family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(h.port);
    std::memcpy(&a->sin_addr, h.addr, 4);
    len = sizeof(sockaddr_in);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(h.port);
    std::memcpy(&a->sin6_addr, h.addr, 16);
    len = sizeof(sockaddr_in6);
  }
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0)
    throw Failure(std::string("raw connect: ") + std::strerror(errno));
  return fd;
}

// What a stranger who knows a listener's handle (not the job's secret) can send: the
// plugin's old bare hello for this listener, half of the job's handshake hello, or the
// handshake with a guessed secret and a proof that cannot be right; then `then`.
void stranger(const char* handle, int how, const std::function<void(int fd)>& then) {
  nccl_net::ListenHandle h;
  std::memcpy(&h, handle, sizeof h);
  const int fd = raw_connect(handle);
  bootstrap::auth::Dialer d(bootstrap::JobSecret::from_text("a guess"), bootstrap::auth::Channel::plugin, {});
  if (how == 0) {
    const std::size_t half = d.hello().size() / 2;
    EXPECT(::send(fd, d.hello().data(), half, MSG_NOSIGNAL) == static_cast<ssize_t>(half));
  } else {
    EXPECT(::send(fd, d.hello().data(), d.hello().size(), MSG_NOSIGNAL) == static_cast<ssize_t>(d.hello().size()));
    unsigned char challenge[bootstrap::auth::kChallengeBytes];
    EXPECT(::recv(fd, challenge, sizeof challenge, MSG_WAITALL) == static_cast<ssize_t>(sizeof challenge));
    const std::vector<unsigned char> forged(sizeof(nccl_net::Hello) + bootstrap::auth::kMacBytes, 0);
    EXPECT(::send(fd, forged.data(), forged.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(forged.size()));
  }
  then(fd);
  ::close(fd);
}

}  // namespace

// Connection setup against strangers and a listener that never answers. A stranger who
// sends half of the job's hello and goes, one who stalls there, and one who guesses the
// secret are each dropped without failing accept, and the real peer connecting after
// them gets its comm. A connect to a listener that never answers fails (ncclSystemError)
// instead of returning a null comm forever.
bool case_handshake(const CaseArgs& a) {
  const std::vector<std::pair<std::string, std::string>> short_timeout = {
      {"STRATA_NET_CONNECT_TIMEOUT_S", "1"}};
  return run_pair(
      [&](int role, Channel& ch) {
        auto net = load_plugin(a.plugin, a.version);
        void* ctx = nullptr;
        ok(net->init(&ctx), "init");
        char handle[128] = {};
        // 1. Strangers first (the stalled one is dropped at the 1 s timeout), then the peer.
        if (role == 0) {
          void* lc = nullptr;
          ok(net->listen(ctx, 0, handle, &lc), "listen");
          ch.send(handle, sizeof handle);
          void* rc = nullptr;
          const auto deadline = std::chrono::steady_clock::now() + 20s;
          while (!rc) {
            ok(net->accept(lc, &rc), "accept while strangers knock");
            EXPECT(std::chrono::steady_clock::now() < deadline);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          ch.sync();  // both ends are up before either closes
          ok(net->close_recv(rc), "closeRecv");
          ok(net->close_listen(lc), "closeListen");
        } else {
          ch.recv(handle, sizeof handle);
          stranger(handle, 0, [](int) {});
          stranger(handle, 1, [](int) {});
          stranger(handle, 0, [](int) { std::this_thread::sleep_for(std::chrono::milliseconds(1500)); });
          void* sc = nullptr;
          const auto deadline = std::chrono::steady_clock::now() + 20s;
          while (!sc) {
            ok(net->connect(ctx, 0, handle, &sc), "connect after the strangers");
            EXPECT(std::chrono::steady_clock::now() < deadline);
          }
          ch.sync();
          ok(net->close_send(sc), "closeSend");
        }
        // 2. The listener never answers: connect fails once the timeout (1 s) has passed.
        {
          if (role == 0) {
            void* lc = nullptr;
            ok(net->listen(ctx, 0, handle, &lc), "listen");
            ch.send(handle, sizeof handle);
            ch.sync();
            ok(net->close_listen(lc), "closeListen");
          } else {
            ch.recv(handle, sizeof handle);
            const auto deadline = std::chrono::steady_clock::now() + 20s;
            void* sc = nullptr;
            int code = 0;
            while (code == 0 && !sc) {
              code = net->connect(ctx, 0, handle, &sc);
              EXPECT(std::chrono::steady_clock::now() < deadline);
            }
            EXPECT(code == kSystemError && sc == nullptr);
            ch.sync();
          }
        }
        ok(net->finalize(ctx), "finalize");
        return 0;
      },
      setup(a, "", short_timeout), setup(a, "", short_timeout), kTimeout);
}

bool run_bench(const CaseArgs& a, const BenchArgs& b) {
  auto peer = [&](const std::string& region, const std::string& netns) {
    PeerSetup s;
    s.env = a.env;
    s.env.emplace_back("STRATA_REGION", region);
    if (!b.interface.empty()) s.env.emplace_back("STRATA_NET_IF", b.interface);
    s.netns = netns;
    return s;
  };
  const auto limit = std::chrono::seconds(static_cast<long long>(b.seconds) + 60);
  return run_pair(
      [&](int role, Channel& ch) {
        auto net = load_plugin(a.plugin, a.version);
        Conn c = connect_pair(*net, ch, 0, 30s);
        const auto deadline = std::chrono::steady_clock::now() + limit;
        std::vector<std::unique_ptr<char[]>> bufs;
        for (int i = 0; i < b.window; ++i) {
          bufs.emplace_back(new char[b.size]);
          fill_pattern(bufs.back().get(), b.size, 1, 0);
        }
        ch.sync();
        using Clock = std::chrono::steady_clock;
        // When a pass over the requests changed nothing: yield the CPU (the default),
        // spin (PLUGIN_BENCH_IDLE=spin) or nap 20 us (=sleep).
        const char* mode = std::getenv("PLUGIN_BENCH_IDLE");
        const std::string idle_mode = mode ? mode : "yield";
        auto idle = [&] {
          if (idle_mode == "yield") sched_yield();
          else if (idle_mode == "sleep") std::this_thread::sleep_for(std::chrono::microseconds(20));
        };
        if (role == 0) {  // sender: full window for `seconds`, then a zero-byte "stop"
          std::vector<void*> reqs(static_cast<std::size_t>(b.window), nullptr);
          const auto end = Clock::now() + std::chrono::duration<double>(b.seconds);
          bool stop_sent = false;
          std::size_t in_flight = 0;
          while (!stop_sent || in_flight > 0) {
            EXPECT(Clock::now() < deadline);
            bool progressed = false;
            for (std::size_t i = 0; i < reqs.size(); ++i) {
              if (reqs[i]) {
                int done = 0, size = 0;
                ok(net->test(reqs[i], &done, &size), "test(send)");
                if (done) reqs[i] = nullptr, --in_flight, progressed = true;
              }
              if (!reqs[i] && !stop_sent) {
                const bool last = Clock::now() >= end;
                char* src = bufs[i % static_cast<std::size_t>(std::clamp(b.send_buffers, 1, b.window))].get();
                ok(net->isend(c.send, src, last ? 0 : b.size, 0, nullptr, &reqs[i]), "isend");
                if (reqs[i]) ++in_flight, stop_sent = last;
              }
            }
            if (!progressed) idle();
          }
        } else {  // receiver: time from the first message to the last before the stop
          // Receives match sends in posting order, so the ones posted before the stop's
          // receive all get data; those after it never will and are dropped at close.
          std::vector<void*> reqs(static_cast<std::size_t>(b.window), nullptr);
          std::vector<std::uint64_t> posted_as(reqs.size(), 0);
          std::uint64_t next_post = 0, stop_at = UINT64_MAX;
          std::size_t messages = 0, bytes = 0;
          Clock::time_point first{}, last{};
          for (;;) {
            EXPECT(Clock::now() < deadline);
            bool waiting = false, progressed = false;
            for (std::size_t i = 0; i < reqs.size(); ++i) {
              if (!reqs[i]) {
                if (stop_at != UINT64_MAX) continue;
                void* data = bufs[i].get();
                std::size_t cap = b.size;
                int tag = 0;
                ok(net->irecv(c.recv, 1, &data, &cap, &tag, nullptr, &reqs[i]), "irecv");
                if (reqs[i]) posted_as[i] = next_post++;
                continue;
              }
              if (posted_as[i] > stop_at) continue;
              waiting = true;
              int done = 0, size = 0;
              ok(net->test(reqs[i], &done, &size), "test(recv)");
              if (!done) continue;
              reqs[i] = nullptr;
              progressed = true;
              if (size == 0) {
                stop_at = posted_as[i];
                continue;
              }
              if (messages == 0) first = Clock::now();
              last = Clock::now();
              ++messages;
              if (messages > 1) bytes += static_cast<std::size_t>(size);  // the first starts the clock
              if (messages % 64 == 1)
                EXPECT(check_pattern(bufs[i].get(), b.size, 1, 0) == b.size);
            }
            if (stop_at != UINT64_MAX && !waiting) break;
            if (!progressed) idle();
          }
          const double secs = std::chrono::duration<double>(last - first).count();
          std::printf("bench v%d: %zu messages of %zu bytes, window %d, %d send buffer(s), %s path: "
                      "%.3f s, %.2f Gbit/s (%.1f MB/s)\n",
                      a.version, messages, b.size, b.window, std::clamp(b.send_buffers, 1, b.window),
                      b.region0 != b.region1        ? "striped"
                      : intra_path(a) == "tcp" ? "same-region TCP"
                                               : "same-region UCX",
                      secs, double(bytes) * 8 / secs / 1e9, double(bytes) / secs / 1e6);
        }
        ch.sync();
        close_conn(*net, c);  // receives still posted are dropped with the comm
        return 0;
      },
      peer(b.region0, b.netns0), peer(b.region1, b.netns1), limit + 30s);
}

}  // namespace strata::plugin_test
