#include "listening_ports.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace strata::test {

namespace {

std::set<std::string> socket_inodes() {
  std::set<std::string> inodes;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) {
      char target[64] = {};
      const std::string link = std::string("/proc/self/fd/") + e->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      const std::string t(target, n > 0 ? static_cast<std::size_t>(n) : 0);
      if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
    }
    ::closedir(d);
  }
  return inodes;
}

struct Row {
  unsigned local_port = 0, remote_port = 0;
  std::string state, timer;
};

// Rows of /proc/self/net/tcp{,6} whose sockets this process holds.
std::vector<Row> my_sockets() {
  const auto inodes = socket_inodes();
  std::vector<Row> rows;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (!inodes.count(inode)) continue;
      auto port = [](const std::string& a) {
        return static_cast<unsigned>(std::stoul(a.substr(a.find(':') + 1), nullptr, 16));
      };
      // timer is "tr:when": 0 none, 1 retransmit, 2 keepalive (or another timer), 4 window probe.
      rows.push_back(Row{port(local), port(remote), state, timer.substr(0, timer.find(':'))});
    }
  }
  return rows;
}

}  // namespace

std::set<unsigned> listening_ports() {
  std::set<unsigned> ports;
  for (const auto& r : my_sockets())
    if (r.state == "0A") ports.insert(r.local_port);  // 0A: LISTEN
  return ports;
}

std::set<std::string> connections_without_keepalive() {
  // From the descriptors themselves: the option, not a timer that a retransmission or a
  // delayed acknowledgement can stand in front of.
  std::set<std::string> out;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) {
      const int fd = std::atoi(e->d_name);
      if (fd <= 2 && e->d_name[0] != '0' && e->d_name[0] != '1' && e->d_name[0] != '2') continue;
      tcp_info info{};
      socklen_t len = sizeof info;
      if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 || info.tcpi_state != TCP_ESTABLISHED) continue;
      int on = 0;
      len = sizeof on;
      if (::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len) == 0 && on) continue;
      sockaddr_storage here{}, there{};
      socklen_t hl = sizeof here, tl = sizeof there;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&here), &hl);
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&there), &tl);
      auto port = [](const sockaddr_storage& a) {
        return ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port
                                             : reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
      };
      out.insert(std::to_string(port(here)) + "->" + std::to_string(port(there)));
    }
    ::closedir(d);
  }
  return out;
}

}  // namespace strata::test
