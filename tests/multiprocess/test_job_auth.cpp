// A stranger who knows a job's addresses but not its secret, tried at every listener of a
// live 3-rank job in 2 regions: the rendezvous store, the TCP transport, the WAN link and
// the control mesh. At each it speaks the old protocol (a bare hello claiming a rank, then
// frames), runs the job's handshake with a wrong secret, opens a connection and says
// nothing, and floods the transport with more half-open connections than a listener keeps.
// Every attempt is closed; the ranks log each refusal with the stranger's address; none
// of it takes a rank's place or memory, and the job's allreduce afterwards is exact. And
// the listeners bind the job's address, not every interface, unless asked to.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/asio.hpp"
#include "bootstrap.pb.h"
#include "bootstrap/file_store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "fork_ranks.hpp"
#include "job_handshake.hpp"
#include "listening_ports.hpp"
#include "store_process.hpp"
#include "strata/strata.hpp"
#include "temp_dir.hpp"

namespace strata::test {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;
using bootstrap::auth::Channel;
using Clock = std::chrono::steady_clock;

constexpr const char* kSecret = "the job's secret, as a launcher would spread it";

std::size_t rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

tcp::endpoint endpoint_of(const std::string& addr) {
  const auto [host, port] = bootstrap::split_host_port(addr, "address");
  return {asio::ip::make_address(host), port};
}

// True when the listener closed the connection within `within` (EOF or reset).
bool closed_within(tcp::socket& s, std::chrono::milliseconds within) {
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

// The three attempts on one listener; throws naming the listener where one was kept.
void attack(asio::io_context& io, const std::string& name, const std::string& addr, Channel channel,
            const std::string& old_hello, std::size_t payload_bytes) {
  const auto ep = endpoint_of(addr);
  {  // the protocol before the handshake: a bare hello claiming rank 2, and a frame
    tcp::socket s(io);
    s.connect(ep);
    boost::system::error_code ec;
    asio::write(s, asio::buffer(old_hello + std::string(64, '\x01')), ec);
    require(closed_within(s, 5s), name + " kept a connection that sent a bare hello");
  }
  {  // the handshake with a wrong secret: the dialer finds out the listener is not its
     // job's, and a proof that is not right is refused by the listener
    tcp::socket s(io);
    s.connect(ep);
    const auto wrong = bootstrap::JobSecret::from_text("a guess");
    bootstrap::auth::Dialer d(wrong, channel, bootstrap::auth::Bytes(payload_bytes, 0));
    asio::write(s, asio::buffer(d.hello()));
    std::array<unsigned char, bootstrap::auth::kChallengeBytes> challenge{};
    asio::read(s, asio::buffer(challenge));
    require(!d.answer(challenge), name + " proved knowledge of a secret the stranger guessed");
    asio::write(s, asio::buffer(std::vector<unsigned char>(payload_bytes + bootstrap::auth::kMacBytes, 0)));
    require(closed_within(s, 5s), name + " kept a connection whose proof was wrong");
  }
  {  // half open: connects and says nothing (STRATA_HANDSHAKE_S=1 on the ranks)
    tcp::socket s(io);
    s.connect(ep);
    require(closed_within(s, 4s), name + " kept a silent connection past the handshake's deadline");
  }
}

std::string hello_of(std::uint32_t magic, std::vector<std::uint32_t> rest) {
  rest.insert(rest.begin(), magic);
  return std::string(reinterpret_cast<const char*>(rest.data()), rest.size() * 4);
}

void stranger(const std::string& root, bootstrap::FileStore& meet) {
  asio::io_context io;
  // The store, while the ranks meet there: a SET of rank 2's record in the old protocol.
  bootstrap::wire::StoreRequest req;
  req.set_op(bootstrap::wire::StoreRequest::SET);
  req.add_keys("strata/rank/2");
  req.set_value("impostor");
  const std::string body = req.SerializeAsString();
  const auto n = static_cast<std::uint32_t>(body.size());
  const std::string set_frame = std::string(reinterpret_cast<const char*>(&n), 4) + body;
  for (const auto until = Clock::now() + 20s;;) {  // rank 0 may not serve yet
    tcp::socket probe(io);
    boost::system::error_code ec;
    probe.connect(endpoint_of(root), ec);
    if (!ec) break;
    require(Clock::now() < until, "the store never came up");
    std::this_thread::sleep_for(20ms);
  }
  attack(io, "the rendezvous store", root, Channel::store, set_frame, 0);

  const auto addrs = meet.get(std::vector<std::string>{"tcp", "wan", "mesh"}, Clock::now() + 30s);
  attack(io, "the tcp transport", addrs[0], Channel::tcp, hello_of(0x53545254, {2}), 4);
  attack(io, "the wan link", addrs[1], Channel::wan, hello_of(0x5354524E, {2, 0, 0}), 8);
  attack(io, "the control mesh", addrs[2], Channel::mesh, std::string(4, '\0') + hello_of(0x5354434D, {2}), 4);

  // A flood of half-open connections, more than the 256 pending handshakes a listener
  // keeps: those beyond are closed at once, the rest at the deadline.
  std::vector<std::unique_ptr<tcp::socket>> flood;
  for (int i = 0; i < 300; ++i) {
    flood.push_back(std::make_unique<tcp::socket>(io));
    flood.back()->connect(endpoint_of(addrs[0]));
  }
  int closed = 0;
  for (auto& s : flood) closed += closed_within(*s, 4s);
  require(closed == 300, std::to_string(300 - closed) + " of 300 flooding connections were kept");
  meet.set("attacked", "");
}

// Which of `ports` (on 127.0.0.1) is `channel`'s listener: found as a port scan would
// find them, and told apart by the job's own handshake, which the insider can start (it
// knows the secret) and leaves unfinished, so nothing is admitted (each listener it tries
// logs one refusal).
std::string listener_of(Channel channel, std::size_t payload_bytes, const std::set<unsigned>& ports) {
  asio::io_context io;
  for (unsigned port : ports) {
    tcp::socket s(io);
    boost::system::error_code ec;
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)), ec);
    if (ec) continue;
    bootstrap::auth::Dialer d(bootstrap::JobSecret::from_text(kSecret), channel, bootstrap::auth::Bytes(payload_bytes, 0));
    asio::write(s, asio::buffer(d.hello()), ec);
    std::array<unsigned char, bootstrap::auth::kChallengeBytes> challenge{};
    if (!ec) asio::read(s, asio::buffer(challenge), ec);
    if (!ec && d.answer(challenge)) return "127.0.0.1:" + std::to_string(port);
  }
  throw std::runtime_error("rank 0 has no listener that answers as channel " + std::to_string(static_cast<int>(channel)));
}

void member(int rank, const std::string& root, bootstrap::FileStore& meet) {
  ::setenv("STRATA_JOB_SECRET", kSecret, 1);
  ::setenv("STRATA_HANDSHAKE_S", "1", 1);
  ::setenv("STRATA_PROBE", "0", 1);  // no traffic between ranks before the attack
  ::setenv("STRATA_REGION", rank < 2 ? "east" : "west", 1);
  CommOptions o;
  o.transport = TransportKind::tcp;
  Communicator comm(rank, 3, root, o);
  if (rank == 0) {
    // An insider tells the stranger where rank 0 listens, as a port scan would.
    const auto [host, port] = bootstrap::split_host_port(root, "root");
    bootstrap::TcpStore insider(host, port, Clock::now() + 10s, bootstrap::JobSecret::from_text(kSecret));
    // Rank 0's mesh record in the store: its region, its mesh's address, its liveness port's.
    const std::string mesh = insider.get("strata/mesh/0", Clock::now() + 5s);
    const auto first = mesh.find('\n'), second = mesh.find('\n', first + 1);
    const std::string control = mesh.substr(first + 1, second - first - 1), liveness = mesh.substr(second + 1);
    meet.set("mesh", control);
    // The transports' addresses are exchanged over the mesh, not through the store: the
    // two listeners left are the TCP transport's and the WAN link's.
    auto ports = listening_ports();
    for (const auto& known : {root, control, liveness})
      ports.erase(static_cast<unsigned>(std::stoi(known.substr(known.rfind(':') + 1))));
    require(ports.size() == 2, "rank 0 listens on " + std::to_string(ports.size()) + " ports besides the store, mesh and liveness port");
    const std::string tcp_at = listener_of(Channel::tcp, 4, ports);
    ports.erase(static_cast<unsigned>(std::stoi(tcp_at.substr(tcp_at.rfind(':') + 1))));
    meet.set("tcp", tcp_at);
    meet.set("wan", "127.0.0.1:" + std::to_string(*ports.begin()));
  }
  const std::size_t before = rss_kib();
  meet.get("attacked", Clock::now() + 60s);
  if (rank == 0) {
    const double grown_mib = (double(rss_kib()) - double(before)) / 1024.0;
    std::cout << "rank 0 grew by " << grown_mib << " MiB during the attack" << std::endl;
    require(grown_mib < 64, "rank 0's memory grew by " + std::to_string(grown_mib) + " MiB");
  }
  // Random data, the exact integer sum checked; odd and empty counts too.
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1000003}}) {
    std::vector<std::int64_t> v(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<std::int64_t>((i * 2654435761u + rank * 97) % 100003);
    comm.allreduce(v.data(), v.data(), count, DataType::i64, ReduceOp::sum).wait();
    for (std::size_t i = 0; i < count; ++i) {
      std::int64_t want = 0;
      for (int r = 0; r < 3; ++r) want += static_cast<std::int64_t>((i * 2654435761u + r * 97) % 100003);
      require(v[i] == want, "allreduce of " + std::to_string(count) + " wrong at " + std::to_string(i));
    }
  }
}

TEST(JobAuth, StrangerIsRefusedAtEveryListener) {
  TempDir dir;
  const std::string root = free_root_address();
  const auto results = fork_ranks(4, 120s, [&](int rank) {
    bootstrap::FileStore meet(dir.path());
    if (rank == 3) return stranger(root, meet);
    member(rank, root, meet);
  });
  ASSERT_EQ(failures(results), "");
  std::string logs;
  for (const auto& r : results) logs += r.output;
  for (const char* who : {"the rendezvous store: refused a connection from 127.0.0.1:",
                          "tcp transport of rank 0: refused a connection from 127.0.0.1:",
                          "wan link of rank 0: refused a connection from 127.0.0.1:",
                          "control mesh of rank 0: refused a connection from 127.0.0.1:"})
    EXPECT_NE(logs.find(who), std::string::npos) << "no refusal logged as \"" << who << "\":\n" << logs;
  EXPECT_NE(logs.find("does not know the job's secret"), std::string::npos) << logs;
  EXPECT_NE(logs.find("did not prove itself within the deadline"), std::string::npos) << logs;
}

// Ranks launched with different secrets do not form a job: the odd one out is told at
// once by the store, naming the setting, instead of timing out.
TEST(JobAuth, RankWithAnotherSecretIsToldAtOnce) {
  const std::string root = free_root_address();
  const auto results = fork_ranks(2, 60s, [&](int rank) {
    ::setenv("STRATA_JOB_SECRET", rank == 0 ? kSecret : "another job", 1);
    ::setenv("STRATA_TIMEOUT_S", "5", 1);
    CommOptions o;
    o.transport = TransportKind::tcp;
    if (rank == 1) std::this_thread::sleep_for(200ms);  // rank 0 serves the store
    Communicator comm(rank, 2, root, o);
  });
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NE(results[1].exit_code, 0);
  EXPECT_FALSE(results[1].timed_out);
  EXPECT_NE(results[1].output.find("does not know the job's secret"), std::string::npos) << results[1].output;
  EXPECT_NE(results[1].output.find("STRATA_JOB_SECRET"), std::string::npos) << results[1].output;
  EXPECT_NE(results[0].exit_code, 0) << "rank 0 formed a job without rank 1";
}

// A UniqueId carries its own secret: ranks need no setting, and the store it names admits
// only those who hold the id.
TEST(JobAuth, UniqueIdCarriesTheSecret) {
  const StoreProcess store;
  const UniqueId& id = store.id();
  const auto results = fork_ranks(3, 60s, [&](int rank) {
    if (rank == 2) {  // knows the address, not the id
      const auto [host, port] = bootstrap::split_host_port(id.root(), "root");
      try {
        bootstrap::TcpStore s(host, port, Clock::now() + 5s, bootstrap::JobSecret{});
      } catch (const TransportError& e) {
        require(std::string(e.what()).find("does not know the job's secret") != std::string::npos, e.what());
        return;
      }
      throw std::runtime_error("the id's store admitted a client without the id's secret");
    }
    CommOptions o;
    o.transport = TransportKind::tcp;
    Communicator comm(id, rank, 2, o);
    std::vector<float> v(1001, float(rank + 1));
    comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum).wait();
    for (float x : v) require(x == 3.0f, "allreduce over an id's job is wrong");
  });
  EXPECT_EQ(failures(results), "");
}

// The IPv4 addresses this process listens on, as "a.b.c.d:port": the LISTEN sockets of
// /proc/net/tcp whose inode is one of this process's descriptors.
std::vector<std::string> own_listeners() {
  std::vector<std::string> inodes;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) inodes.push_back(target.substr(8, target.size() - 9));
  }
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // the header
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    f >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state != "0A" || std::find(inodes.begin(), inodes.end(), inode) == inodes.end()) continue;
    const std::uint32_t ip = static_cast<std::uint32_t>(std::stoul(local.substr(0, 8), nullptr, 16));
    const unsigned port = static_cast<unsigned>(std::stoul(local.substr(9), nullptr, 16));
    out.push_back(std::to_string(ip & 0xff) + "." + std::to_string(ip >> 8 & 0xff) + "." +
                  std::to_string(ip >> 16 & 0xff) + "." + std::to_string(ip >> 24) + ":" + std::to_string(port));
  }
  return out;
}

// Every listener of a job in 2 regions (the store on rank 0, the TCP transport, the WAN
// link, the control mesh) binds the job's address (here loopback, the way to the root),
// not every interface; STRATA_SOCKET_BIND_ANY=1 asks for the wildcard, and the job still
// publishes, reaches and reduces over the job's address.
TEST(JobAuth, ListenersBindTheJobsAddressUnlessAsked) {
  for (const bool any : {false, true}) {
    const std::string root = free_root_address();
    const auto results = fork_ranks(2, 60s, [&](int rank) {
      ::setenv("STRATA_JOB_SECRET", kSecret, 1);
      ::setenv("STRATA_REGION", rank == 0 ? "east" : "west", 1);
      if (any) ::setenv("STRATA_SOCKET_BIND_ANY", "1", 1);
      CommOptions o;
      o.transport = TransportKind::tcp;
      Communicator comm(rank, 2, root, o);
      const auto listening = own_listeners();
      std::string all;
      for (const auto& l : listening) all += " " + l;
      std::cout << "rank " << rank << " listens on" << all << std::endl;
      require(listening.size() >= (rank == 0 ? 4u : 3u), "rank " + std::to_string(rank) + " has too few listeners:" + all);
      const std::string want = any ? "0.0.0.0:" : "127.0.0.1:";
      for (const auto& l : listening)
        require(l.rfind(want, 0) == 0, "rank " + std::to_string(rank) + " listens on " + l + ", not " + want + "*");
      std::vector<std::int64_t> v(1000003);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>((i * 7919 + rank) % 65537);
      comm.allreduce(v.data(), v.data(), v.size(), DataType::i64, ReduceOp::sum).wait();
      for (std::size_t i = 0; i < v.size(); ++i)
        require(v[i] == static_cast<std::int64_t>((i * 7919) % 65537 + (i * 7919 + 1) % 65537), "allreduce wrong");
    });
    EXPECT_EQ(failures(results), "") << (any ? "with" : "without") << " STRATA_SOCKET_BIND_ANY";
  }
}

}  // namespace
}  // namespace strata::test
