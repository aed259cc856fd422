// The striped path between regions in TLS 1.3 (STRATA_WAN_TLS=1): keyed by the job's
// secret, every byte verified through a stream that is cut and redialled (the redial runs
// the job's handshake and TLS again); with certificates of an authority made for the
// test; and what must be refused, each with an error that says why: a rank whose
// certificate another authority signed, ranks that disagree about STRATA_WAN_TLS, and
// TLS keyed by a secret the job does not have.
#include <thread>

#include "case_support.hpp"
#include "plugin_api.hpp"
#include "test_pki.hpp"

namespace strata::plugin_test {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const Env kPsk = {{"STRATA_JOB_SECRET", "plugin tls test"}, {"STRATA_WAN_TLS", "1"}};

Env with(Env base, const Env& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

Env certificates(const test::Pki& pki, const std::string& who) {
  return {{"STRATA_JOB_SECRET", "plugin tls test"},
          {"STRATA_WAN_TLS", "1"},
          {"STRATA_TLS_CERT", pki.path(who + ".pem")},
          {"STRATA_TLS_KEY", pki.path(who + ".key")},
          {"STRATA_TLS_CA", pki.path("ca.pem")}};
}

// Both ranks listen, swap handles, then connect and accept until each call has either
// given a comm or failed: the codes (0 with a comm) go to *connect_rc and *accept_rc.
// Accept is not called again after it fails, nor after `accept_until_logged` is logged.
void try_connect(NetApi& net, Channel& ch, int* connect_rc, int* accept_rc, const char* accept_until_logged) {
  void* ctx = nullptr;
  ok(net.init(&ctx), "init");
  char mine[128] = {}, theirs[128] = {};
  void* lc = nullptr;
  ok(net.listen(ctx, 0, mine, &lc), "listen");
  ch.send(mine, sizeof mine);
  ch.recv(theirs, sizeof theirs);
  void *sc = nullptr, *rc = nullptr;
  bool connected = false, accepted = false;
  *connect_rc = *accept_rc = 0;
  const auto deadline = Clock::now() + 30s;
  while (!connected || !accepted) {
    EXPECT(Clock::now() < deadline);
    if (!connected) {
      *connect_rc = net.connect(ctx, 0, theirs, &sc);
      connected = *connect_rc != 0 || sc;
    }
    if (!accepted) {
      *accept_rc = net.accept(lc, &rc);
      accepted = *accept_rc != 0 || rc || (accept_until_logged && logged(accept_until_logged));
    }
    std::this_thread::yield();
  }
  ch.sync();  // neither closes what the other still works on
  if (sc) ok(net.close_send(sc), "closeSend");
  if (rc) ok(net.close_recv(rc), "closeRecv");
  ok(net.close_listen(lc), "closeListen");
  ok(net.finalize(ctx), "finalize");
}

void expect_logged(const char* needle) {
  if (!logged(needle)) {
    std::string all;
    for (const auto& l : logged_lines()) all += "\n  " + l;
    throw Failure(std::string("the plugin never logged '") + needle + "'; it logged:" + all);
  }
}

}  // namespace

// Keyed by the job's secret; stream 0 of each direction is cut after 5 frames and
// redialled inside a new TLS session, and every byte still arrives, verified.
bool case_crossregion_tls(const CaseArgs& a) {
  return crossregion_case(a,
                          with(kPsk, {{"STRATA_WAN_STREAMS", "3"},
                                      {"STRATA_WAN_STRIPE_BYTES", "65536"},
                                      {"STRATA_WAN_EMULATE", "cut=5,delay=5ms"}}),
                          120, 0.05,
                          {"striped (another region), TLS", "the job's secret (PSK)", "redialled", ", TLS"});
}

bool case_tls_refusals(const CaseArgs& a) {
  const test::Pki pki;
  const Env wan = {{"STRATA_WAN_STREAMS", "2"}, {"STRATA_NET_CONNECT_TIMEOUT_S", "20"}};

  // 1. Certificates of the job's authority on both ranks: verified traffic.
  PlanOptions popt;
  popt.messages = 60;
  popt.large_share = 0.05;
  if (!traffic_case(a, setup(a, "us-east", with(certificates(pki, "rank"), wan)),
                    setup(a, "eu-west", with(certificates(pki, "rank"), wan)), popt,
                    {"TLS 1.3, certificates", "striped (another region), TLS"}))
    return false;

  // 2. Rank 1 shows a certificate another authority signed. Each connect fails naming
  // the TLS handshake, and each listener drops the connection without failing accept.
  // Rank 0, which checks rank 1's certificate both as client and as server, names it;
  // rank 1 sees an alert or just the close, depending on which reaches it first.
  const bool rogue = run_pair(
      [&](int role, Channel& ch) {
        auto net = load_plugin(a.plugin, a.version);
        int connect_rc = 0, accept_rc = 0;
        try_connect(*net, ch, &connect_rc, &accept_rc, "dropped a connection");
        EXPECT(connect_rc == kRemoteError);
        EXPECT(accept_rc == 0);
        expect_logged("TLS handshake with");
        if (role == 0) expect_logged("certificate verify failed");
        return 0;
      },
      setup(a, "us-east", with(certificates(pki, "rank"), wan)),
      setup(a, "eu-west", with(certificates(pki, "rogue"), wan)), kTimeout);
  if (!rogue) return false;

  // 3. Rank 0 runs TLS, rank 1 does not: both listeners refuse the other's connection,
  // naming the setting; rank 0's connect fails as rank 1 closes its TLS handshake.
  const bool mismatch = run_pair(
      [&](int role, Channel& ch) {
        auto net = load_plugin(a.plugin, a.version);
        int connect_rc = 0, accept_rc = 0;
        try_connect(*net, ch, &connect_rc, &accept_rc, nullptr);
        EXPECT(accept_rc == kInvalidUsage);
        expect_logged("set STRATA_WAN_TLS alike on every rank");
        if (role == 0) EXPECT(connect_rc == kRemoteError);
        return 0;
      },
      setup(a, "us-east", with(kPsk, wan)),
      setup(a, "eu-west", with({{"STRATA_JOB_SECRET", "plugin tls test"}, {"STRATA_WAN_TLS", "0"}}, wan)),
      kTimeout);
  if (!mismatch) return false;

  // 4. TLS keyed by the job's secret in a job without one: init fails, naming the setting.
  return run_isolated(
      [&] {
        auto net = load_plugin(a.plugin, a.version);
        void* ctx = nullptr;
        EXPECT(net->init(&ctx) == kInvalidUsage);
        expect_logged("keys TLS by the job's secret, and this job has none");
        if (ctx) net->finalize(ctx);
        return 0;
      },
      setup(a, "us-east", {{"STRATA_JOB_SECRET", ""}, {"STRATA_JOB_SECRET_FILE", ""}, {"STRATA_WAN_TLS", "1"}}),
      kTimeout);
}

}  // namespace strata::plugin_test
