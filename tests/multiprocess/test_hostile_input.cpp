// What a hostile or unlucky peer can do to a rank through its open ports, as a probe of
// the library found it: flood the rendezvous store, announce absurd lengths on the
// transports, and exhaust file descriptors. Each case bounds the victim's memory or
// names the problem, where before it took a gigabyte, killed the job, or timed out with
// the wrong culprit. A stranger is turned away at the job's handshake
// (test_job_auth.cpp), so the peers here know the job's secret: a member gone wrong.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap.pb.h"
#include "bootstrap/file_store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "base/asio.hpp"
#include "fork_ranks.hpp"
#include "job_handshake.hpp"
#include "strata/strata.hpp"
#include "temp_dir.hpp"
#include "transport/factory.hpp"
#include "link/frame.hpp"
#include "core/settings_check.hpp"
#include "core/link_settings.hpp"
#include "wan/wan_transport.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;
using transport::Clock;

// Resident memory of a process, in bytes (VmRSS of /proc/<pid>/status).
std::size_t rss_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

std::string le32(std::uint32_t n) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// True when the server closed the connection (EOF or reset) within `within`.
bool closed_by_peer(tcp::socket& s, std::chrono::milliseconds within) {
  s.non_blocking(true);
  const auto until = Clock::now() + within;
  char c;
  while (Clock::now() < until) {
    boost::system::error_code ec;
    s.read_some(asio::buffer(&c, 1), ec);
    if (ec == asio::error::would_block) {
      std::this_thread::sleep_for(10ms);
      continue;
    }
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }
  return false;
}

// A store server in a child process of its own, so its memory can be read apart from the
// flood's; killed when this goes out of scope.
class ServerProcess {
 public:
  explicit ServerProcess(bootstrap::StoreServerLimits limits = {}) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      bootstrap::StoreServer server("127.0.0.1", 0, {}, limits);
      const std::uint16_t port = server.port();
      if (::write(fds[1], &port, sizeof port) != sizeof port) ::_exit(1);
      ::pause();  // serves on its own thread until killed
      ::_exit(0);
    }
    ::close(fds[1]);
    if (::read(fds[0], &port_, sizeof port_) != sizeof port_) port_ = 0;
    ::close(fds[0]);
  }
  ~ServerProcess() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }
  tcp::endpoint endpoint() const { return {asio::ip::make_address("127.0.0.1"), port_}; }

 private:
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

// The probe's flood: 16 connections announcing 64 MiB requests, 16 more that announce
// 4 MiB (within the limit) and then stall after 1 MiB, and 8 SETs of 60 MiB values. The
// old server committed every announced length at once: 1.06 GB for the first part, 1.6
// GB for the values. Now the announced 64 MiB and the 60 MiB values are refused (their
// connections closed), the stalled requests hold only what actually arrived, within the
// 64 MiB budget for partial requests, and rank 0 grows by less than 100 MiB in all
// while a real client goes on working.
TEST(HostileInput, StoreFloodKeepsRankZerosMemoryBounded) {
  ServerProcess server;  // the default limits
  ASSERT_NE(server.port(), 0);
  asio::io_context io;
  bootstrap::TcpStore client("127.0.0.1", server.port(), Clock::now() + 10s, {});
  client.set("before", "1");
  std::this_thread::sleep_for(200ms);
  const std::size_t at_rest = rss_of(server.pid());

  std::vector<std::unique_ptr<tcp::socket>> announced, stalled, values;
  const auto member = [&] {
    auto s = std::make_unique<tcp::socket>(io);
    s->connect(server.endpoint());
    prove(*s, {}, bootstrap::auth::Channel::store);
    return s;
  };
  for (int i = 0; i < 16; ++i) {
    auto s = member();
    asio::write(*s, asio::buffer(le32(64u << 20)));
    announced.push_back(std::move(s));
  }
  const std::string mib(1u << 20, 'x');
  for (int i = 0; i < 16; ++i) {
    auto s = member();
    asio::write(*s, asio::buffer(le32(4u << 20)));
    asio::write(*s, asio::buffer(mib));
    stalled.push_back(std::move(s));
  }
  for (int i = 0; i < 8; ++i) {
    bootstrap::wire::StoreRequest req;
    req.set_op(bootstrap::wire::StoreRequest::SET);
    req.add_keys("big" + std::to_string(i));
    req.set_value(std::string(60u << 20, 'v'));
    auto s = member();
    boost::system::error_code ec;  // the server may close before all of it is written
    const std::string body = req.SerializeAsString();
    asio::write(*s, asio::buffer(le32(static_cast<std::uint32_t>(body.size())) + body), ec);
    values.push_back(std::move(s));
  }
  for (auto& s : announced) EXPECT_TRUE(closed_by_peer(*s, 5s)) << "a 64 MiB announcement was not refused";
  for (auto& s : values) EXPECT_TRUE(closed_by_peer(*s, 5s)) << "a 60 MiB value was not refused";

  // A real client is not held up, and sees a clear refusal for an oversized value.
  client.set("during", "2");
  EXPECT_EQ(client.get("during", Clock::now() + 5s), "2");
  try {
    client.set("huge", std::string(2u << 20, 'h'));
    ADD_FAILURE() << "a 2 MiB value was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the limits"), std::string::npos) << e.what();
  }
  std::this_thread::sleep_for(300ms);
  const std::size_t flooded = rss_of(server.pid());
  const double grown_mib = double(flooded - std::min(flooded, at_rest)) / (1 << 20);
  std::cout << "rendezvous store: " << at_rest / (1 << 20) << " MiB at rest, " << flooded / (1 << 20)
            << " MiB under the flood (+" << grown_mib << " MiB)" << std::endl;
  EXPECT_LT(grown_mib, 100.0) << "the store's memory grew with what the flood announced";
}

// Connections that never finish a request are closed after the server's deadline, and
// beyond the connection cap new ones are closed at once; the listener keeps serving. The
// same holds one step earlier for connections that have not finished the job's handshake:
// they own nothing, are closed at the handshake's deadline, and are capped on their own.
TEST(HostileInput, StoreDropsIdleAndExcessConnections) {
  bootstrap::StoreServerLimits limits;
  limits.first_request = 500ms;
  limits.max_connections = 8;
  limits.handshake.deadline = 500ms;
  limits.handshake.max_pending = 8;
  ServerProcess server(limits);
  asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> idle, silent;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<tcp::socket>(io));
    idle.back()->connect(server.endpoint());
    prove(*idle.back(), {}, bootstrap::auth::Channel::store);
  }
  for (int i = 0; i < 8; ++i) {
    silent.push_back(std::make_unique<tcp::socket>(io));
    silent.back()->connect(server.endpoint());
  }
  std::this_thread::sleep_for(100ms);
  tcp::socket extra(io);
  extra.connect(server.endpoint());
  EXPECT_TRUE(closed_by_peer(extra, 300ms)) << "a ninth pending handshake was kept";
  for (auto& s : idle) EXPECT_TRUE(closed_by_peer(*s, 5s)) << "a silent connection outlived its deadline";
  for (auto& s : silent) EXPECT_TRUE(closed_by_peer(*s, 5s)) << "a half-open handshake outlived its deadline";
  bootstrap::TcpStore client("127.0.0.1", server.port(), Clock::now() + 10s, {});
  client.set("after", "ok");
  EXPECT_EQ(client.get("after", Clock::now() + 5s), "ok");
}

// A connection to a rank's transport port that claims to be a peer and announces a 1 TiB
// message used to make that rank throw std::bad_alloc and the job die. The frame now
// waits unread (its receive is never posted), the victim's memory stays put, and a real
// peer's message still arrives. Rank 0 is the victim, rank 1 the impostor, rank 2 a peer.
void oversized_announcement(TransportKind kind, bool wan) {
  TempDir dir;
  const auto results = fork_ranks(3, 60s, [&](int rank) {
    bootstrap::FileStore store(dir.path());
    if (rank == 1) {
      const std::string kind_key = wan ? "wan" : "tcp";
      // The TCP transport's records name the region before the address.
      const std::string region = wan ? "" : detail::check_settings({}).fabric.region + "\n";
      store.set(kind_key + "/1", region + "127.0.0.1:9");  // the others wait for every rank's address
      store.set("host/1", "another host");                   // ... and for where it runs (host segment)
      std::string addr = store.get(kind_key + "/0", Clock::now() + 20s);
      addr = addr.substr(addr.find('\n') + 1);
      const auto [host, port] = bootstrap::split_host_port(addr, "rank 0's address");
      asio::io_context io;
      tcp::socket s(io);
      s.connect({asio::ip::make_address(host), port});
      if (wan) {
        prove(s, {}, bootstrap::auth::Channel::wan, stream_payload(1, 0));
        link::FrameHeader h;
        h.kind = link::FrameKind::data;
        h.length = 64u << 10;
        h.seq = 1;
        h.msg_id = 1;  // not the next in line: it would be staged whole
        h.total = 1ull << 40;
        const auto bytes = link::seal(h, 0);
        asio::write(s, asio::buffer(bytes));
      } else {
        prove(s, {}, bootstrap::auth::Channel::tcp, rank_payload(1));
        const std::array<std::uint64_t, 2> header{42, 1ull << 40};
        asio::write(s, asio::buffer(header));
      }
      store.set("announced", "");
      store.get("done", Clock::now() + 40s);
      return;
    }
    auto t = kind == TransportKind::tcp && !wan ? transport::make_transport(kind, rank, 3, store, Clock::now() + 20s, {}, detail::check_settings({}).fabric)
                                               : wan::make_wan_transport(rank, 3, store, Clock::now() + 20s, detail::wan_options());
    const std::vector<unsigned char> msg(100000, 7);
    if (rank == 2) {
      store.get("announced", Clock::now() + 20s);
      require(transport::wait(*t, t->isend(0, 5, msg.data(), msg.size()), Clock::now() + 20s), "send timed out");
      require(transport::settle(*t, Clock::now() + 20s), "send not acknowledged");
      store.get("done", Clock::now() + 40s);
      return;
    }
    const std::size_t at_rest = rss_of(::getpid());
    // The impostor's handshake needs this rank's transport to answer meanwhile.
    for (const auto until = Clock::now() + 20s;;) {
      try {
        store.get("announced", Clock::now() + 10ms);
        break;
      } catch (const TimeoutError&) {
        require(Clock::now() < until, "the impostor did not announce");
        t->progress();
      }
    }
    std::vector<unsigned char> in(msg.size());
    // Keep the transport busy with the impostor's stream while the real message comes.
    require(transport::wait(*t, t->irecv(2, 5, in.data(), in.size()), Clock::now() + 20s),
            "the real peer's message did not arrive");
    require(in == msg, "the real peer's message differs");
    const auto until = Clock::now() + 300ms;
    while (Clock::now() < until) t->progress();
    const std::size_t after = rss_of(::getpid());
    const double grown_mib = double(after - std::min(after, at_rest)) / (1 << 20);
    std::cout << (wan ? "wan" : "tcp") << ": victim grew by " << grown_mib << " MiB" << std::endl;
    require(grown_mib < 64, "the victim's memory grew by " + std::to_string(grown_mib) + " MiB");
    store.set("done", "");
  });
  EXPECT_EQ(failures(results), "");
}

TEST(HostileInput, TerabyteHeaderOnTheTcpTransport) { oversized_announcement(TransportKind::tcp, false); }
TEST(HostileInput, TerabyteMessageOnTheWanLink) { oversized_announcement(TransportKind::tcp, true); }

// 24 ranks that may each open only a few dozen files more than they hold at the start
// cannot all connect. Before, every rank waited the whole timeout and then blamed rank 0 ("did not
// answer"), and rank 0's own listener had stopped for good on its first accept error
// without a word. Now a rank that runs out says so, naming the limit, as soon as opening
// a socket fails or its listener has failed for 2 s; its peers then fail too (waiting for
// it, at their deadline here, or stopped at once by a launcher that saw the first failure).
// `margin`: descriptors each rank may open beyond those it holds at the start. With 32
// rank 0 runs out while creating its sockets; with 48 it gets as far as accepting and
// connecting to its peers.
void exhaust_descriptors(rlim_t margin) {
  constexpr int kRanks = 24;
  const std::string root = free_root_address();
  const auto results = fork_ranks(kRanks, 120s, [&](int rank) {
    // Relative to what is open already, which depends on what started the test.
    const auto open_now = static_cast<rlim_t>(
        std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator{}));
    const rlimit rl{open_now + margin, open_now + margin};
    require(::setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit failed");
    std::cout << "limit " << rl.rlim_cur << std::endl;
    ::setenv("STRATA_TIMEOUT_S", "5", 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    Communicator comm(rank, kRanks, root, o);
    std::vector<float> v(1000, 1.0f);
    comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum).wait();
  });
  int named = 0;
  for (const auto& r : results) {
    const auto at = r.output.find("limit ");
    const std::string limit = at == std::string::npos ? "?" : r.output.substr(at + 6, r.output.find('\n', at) - at - 6);
    if (r.output.find("Too many open files") != std::string::npos &&
        r.output.find("at most " + limit + " open files") != std::string::npos &&
        r.output.find("RLIMIT_NOFILE") != std::string::npos)
      ++named;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
  }
  EXPECT_GE(named, 1) << "no rank named the descriptor limit:\n" << failures(results);
}

TEST(HostileInput, DescriptorExhaustionWhileCreatingSocketsIsNamed) { exhaust_descriptors(32); }
TEST(HostileInput, DescriptorExhaustionWhileConnectingIsNamed) { exhaust_descriptors(48); }

}  // namespace
}  // namespace strata::test
