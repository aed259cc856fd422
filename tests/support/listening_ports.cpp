#include "listening_ports.hpp"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace strata::test {

std::set<unsigned> listening_ports() {
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
  std::set<unsigned> ports;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state != "0A" || !inodes.count(inode)) continue;  // 0A: LISTEN
      ports.insert(static_cast<unsigned>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16)));
    }
  }
  return ports;
}

}  // namespace strata::test
