#include "fork_ranks.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <random>
#include <stdexcept>
#include <thread>

namespace strata::test {

namespace {

struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  bool finished = false;
};

void drain(int fd, std::string& into) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return;
    into.append(buf, static_cast<size_t>(n));
  }
}

// Every thread's stack of a process that ran out of time, so that a hang in CI says where
// it hung (gdb comes with scripts/setup-deps.sh; without it, nothing is added).
std::string stacks_of(pid_t pid) {
  if (::access("/usr/bin/gdb", X_OK) != 0) return "";
  const std::string cmd = "timeout 30 /usr/bin/gdb -p " + std::to_string(pid) +
                          " -batch -nx -ex 'thread apply all bt 30' 2>&1 | grep -E '^(Thread|#)'";
  std::string out;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0 && out.size() < 64 * 1024;) out.append(buf, n);
    ::pclose(f);
  }
  return out.empty() ? "" : "\n[stacks when the time ran out]\n" + out;
}

}  // namespace

std::vector<RankResult> fork_ranks(int n, std::chrono::milliseconds timeout,
                                   const std::function<void(int rank)>& body) {
  std::cout.flush();
  std::cerr.flush();
  std::vector<Child> children(n);
  std::vector<RankResult> results(n);
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::close(fds[0]);
      ::dup2(fds[1], STDOUT_FILENO);
      ::dup2(fds[1], STDERR_FILENO);
      ::close(fds[1]);
      int code = 0;
      try {
        body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d failed: %s\n", r, e.what());
        code = 1;
      } catch (...) {
        std::fprintf(stderr, "rank %d failed with a non-standard exception\n", r);
        code = 1;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      std::cout.flush();
      ::_exit(code);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    children[r] = Child{pid, fds[0], false};
    results[r].rank = r;
  }

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int remaining = n;
  while (remaining > 0) {
    std::vector<pollfd> pfds;
    for (auto& c : children)
      if (!c.finished) pfds.push_back(pollfd{c.out_fd, POLLIN, 0});
    ::poll(pfds.data(), pfds.size(), 20);
    for (int r = 0; r < n; ++r) {
      auto& c = children[r];
      if (c.finished) continue;
      drain(c.out_fd, results[r].output);
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        drain(c.out_fd, results[r].output);
        ::close(c.out_fd);
        c.finished = true;
        --remaining;
        results[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (WIFSIGNALED(status))
          results[r].output += "\n[killed by signal " + std::to_string(WTERMSIG(status)) + "]";
      }
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        auto& c = children[r];
        if (c.finished) continue;
        drain(c.out_fd, results[r].output);
        results[r].output += stacks_of(c.pid);
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);
        drain(c.out_fd, results[r].output);
        ::close(c.out_fd);
        c.finished = true;
        results[r].timed_out = true;
        results[r].exit_code = -1;
      }
      remaining = 0;
    }
  }
  return results;
}

std::string free_root_address() {
  // Below the kernel's ephemeral range (32768-60999 by default), so no outgoing connection
  // of a test running alongside can take the port between this check and the store's bind
  // (one did: "Address already in use"); random, so parallel tests rarely pick alike.
  static std::mt19937 rng(static_cast<unsigned>(::getpid()) ^
                          static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_int_distribution<int> port_of(20000, 32000);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = port_of(rng);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (free) return "127.0.0.1:" + std::to_string(port);
  }
  throw std::runtime_error("free_root_address: no free port in 20000-32000 after 200 tries");
}

std::string failures(const std::vector<RankResult>& results) {
  std::string report;
  for (const auto& r : results) {
    if (r.exit_code == 0 && !r.timed_out) continue;
    report += "rank " + std::to_string(r.rank) +
              (r.timed_out ? " timed out" : " exited " + std::to_string(r.exit_code)) +
              ":\n" + r.output + "\n";
  }
  return report;
}

void require(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

}  // namespace strata::test
