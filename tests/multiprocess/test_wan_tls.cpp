// The WAN link inside TLS 1.3 between forked ranks: keyed by the job's secret (PSK) or by
// certificates of an authority made for the test, byte-exact at every size and through a
// stream cut (the reconnect runs the TLS and job handshakes again); a rank whose
// certificate another authority signed, and a plain connection to a TLS listener, are
// refused with an error that says so.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/asio.hpp"
#include "bootstrap/file_store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "fork_ranks.hpp"
#include "job_handshake.hpp"
#include "strata/errors.hpp"
#include "temp_dir.hpp"
#include "test_pki.hpp"
#include "wan/wan_transport.hpp"
#include "wan_exchange.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;
using transport::Clock;

// The job's authority signs "rank"; another one signs "rogue".
wan::TlsSettings tls_settings(const Pki& pki, const std::string& who) {
  wan::TlsSettings s;
  s.on = true;
  s.cert = pki.path(who + ".pem");
  s.key = pki.path(who + ".key");
  s.ca = pki.path("ca.pem");  // both trust only the job's authority
  return s;
}

wan::WanOptions tls_options() {
  wan::WanOptions opt;
  opt.stripe_bytes = 64u << 10;
  opt.tls.on = true;
  opt.secret = bootstrap::JobSecret::from_text("tls test job");
  return opt;
}

const std::vector<std::size_t> kSizes = {0, 1, 7, (1u << 20) + 3, 8u << 20};

// PSK from the job's secret; stream 0 of each direction is cut after 5 frames and must
// come back (a new TCP connection, TLS handshake and job handshake) and resend.
TEST(WanTls, PskStreamCutLosesNothing) {
  auto opt = tls_options();
  opt.emulation.cut_after = 5;
  const auto rs = run_ranks(2, opt, [](transport::Transport& t, bootstrap::Store& s) {
    const auto reconnects = exchange(t, s, 2, kSizes, 2);
    require(reconnects == 1, "expected exactly one cut stream, saw " + std::to_string(reconnects));
  });
  EXPECT_EQ(failures(rs), "");
}

TEST(WanTls, CertificatesExchangeRandomData) {
  const Pki pki;
  auto opt = tls_options();
  opt.tls = tls_settings(pki, "rank");
  const auto rs = run_ranks(3, opt, [](transport::Transport& t, bootstrap::Store& s) {
    exchange(t, s, 3, kSizes, 1);
  });
  EXPECT_EQ(failures(rs), "");
}

// Rank 1 shows a certificate the job's authority did not sign: neither direction
// connects, and the send fails naming TLS instead of hanging.
TEST(WanTls, CertificateOfAnotherAuthorityIsRefused) {
  const Pki pki;
  TempDir dir;
  const auto rs = fork_ranks(2, 60s, [&](int rank) {
    bootstrap::FileStore store(dir.path());
    auto opt = tls_options();
    opt.tls = tls_settings(pki, rank == 1 ? "rogue" : "rank");
    opt.reconnect_for = 1500ms;
    opt.send_buffer = 0;  // sends complete on acknowledgement, so this one reports the refusal
    auto t = wan::make_wan_transport(rank, 2, store, Clock::now() + 10s, opt);
    std::vector<unsigned char> out(1000, 1), in(1000);
    auto r = t->irecv(1 - rank, 3, in.data(), in.size());
    auto s = t->isend(1 - rank, 3, out.data(), out.size());
    std::string error;
    try {
      transport::wait(*t, s, Clock::now() + 10s);
    } catch (const std::exception& e) {
      error = e.what();
    }
    require(!error.empty(), "a send over a link with a rogue certificate did not fail");
    require(error.find("TLS handshake") != std::string::npos, "the error does not name TLS: " + error);
    std::cout << "rank " << rank << ": " << error << std::endl;
  });
  EXPECT_EQ(failures(rs), "");
  const std::string logs = rs[0].output + rs[1].output;
  EXPECT_NE(logs.find("certificate"), std::string::npos) << logs;
}

// TLS keyed by the job's secret needs one: a job without it is told at creation, naming
// the settings, and nothing is left half-built.
TEST(WanTls, PskWithoutASecretIsRefusedAtCreation) {
  TempDir dir;
  bootstrap::FileStore store(dir.path());
  wan::WanOptions opt;
  opt.tls.on = true;  // and no secret: the open key
  try {
    wan::make_wan_transport(0, 1, store, Clock::now() + 5s, opt);
    FAIL() << "a TLS link keyed by the open key was created";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("STRATA_JOB_SECRET"), std::string::npos) << e.what();
  }
}

// A plain connection (the job's handshake without TLS) to a TLS listener is refused.
TEST(WanTls, PlainConnectionToTlsListenerIsRefused) {
  TempDir dir;
  const auto rs = fork_ranks(2, 60s, [&](int rank) {
    bootstrap::FileStore store(dir.path());
    if (rank == 1) {
      store.set("wan/1", "127.0.0.1:9");
      const auto [host, port] = bootstrap::split_host_port(store.get("wan/0", Clock::now() + 10s), "rank 0");
      boost::asio::io_context io;
      boost::asio::ip::tcp::socket sock(io);
      sock.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address(host), port));
      bool refused = false;
      try {
        prove(sock, tls_options().secret, bootstrap::auth::Channel::wan, stream_payload(1, 0));
      } catch (const std::exception&) {
        refused = true;
      }
      store.set("tried", "");
      require(refused, "a TLS listener completed the job's handshake in clear text");
      return;
    }
    auto t = wan::make_wan_transport(rank, 2, store, Clock::now() + 10s, tls_options());
    for (const auto until = Clock::now() + 10s; Clock::now() < until;) {
      t->progress();
      try {
        store.get("tried", Clock::now() + 5ms);
        break;
      } catch (const TimeoutError&) {
      }
    }
  });
  EXPECT_EQ(failures(rs), "");
  EXPECT_NE(rs[0].output.find("TLS handshake failed"), std::string::npos) << rs[0].output;
}

}  // namespace
}  // namespace strata::test
