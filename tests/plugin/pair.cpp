#include "pair.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>

namespace strata::plugin_test {

namespace {

constexpr int kChannelTimeoutMs = 60'000;

void wait_ready(int fd, short events) {
  pollfd p{fd, events, 0};
  const int r = ::poll(&p, 1, kChannelTimeoutMs);
  if (r == 0) throw std::runtime_error("out-of-band channel timed out");
  if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
}

void enter(const PeerSetup& setup) {
  for (const auto& [k, v] : setup.env) {
    if (v.empty())
      ::unsetenv(k.c_str());
    else
      ::setenv(k.c_str(), v.c_str(), 1);
  }
  if (!setup.netns.empty()) {
    const std::string path = "/var/run/netns/" + setup.netns;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0)
      throw std::runtime_error("cannot enter network namespace " + setup.netns + ": " + std::strerror(errno));
    ::close(fd);
  }
}

int child_main(const std::function<int()>& body, const PeerSetup& setup, std::chrono::seconds timeout) {
  ::alarm(static_cast<unsigned>(timeout.count()) + 5);  // the parent's deadline comes first
  try {
    enter(setup);
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[pid %d] failed: %s\n", static_cast<int>(getpid()), e.what());
    return 1;
  }
}

// Waits for all pids until the deadline; kills (by pid) whatever is left then.
bool reap(std::vector<pid_t> pids, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool ok = true;
  while (!pids.empty()) {
    for (std::size_t i = 0; i < pids.size();) {
      int status = 0;
      const pid_t r = ::waitpid(pids[i], &status, WNOHANG);
      if (r == pids[i]) {
        if (WIFSIGNALED(status)) {
          std::fprintf(stderr, "child %d killed by signal %d (%s)\n", pids[i], WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
          ok = false;
        } else if (WEXITSTATUS(status) != 0) {
          std::fprintf(stderr, "child %d exited with %d\n", pids[i], WEXITSTATUS(status));
          ok = false;
        }
        pids.erase(pids.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    if (pids.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (pid_t p : pids) {
        std::fprintf(stderr, "child %d still running after %llds: killed\n", p,
                     static_cast<long long>(timeout.count()));
        ::kill(p, SIGKILL);
        ::waitpid(p, nullptr, 0);
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ok;
}

}  // namespace

void Channel::send(const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    wait_ready(fd_, POLLOUT);
    const ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw std::runtime_error(std::string("channel send: ") + std::strerror(errno));
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void Channel::recv(void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    wait_ready(fd_, POLLIN);
    const ssize_t r = ::recv(fd_, p, n, 0);
    if (r == 0) throw std::runtime_error("channel closed by the other process");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw std::runtime_error(std::string("channel recv: ") + std::strerror(errno));
    }
    p += r;
    n -= static_cast<std::size_t>(r);
  }
}

void Channel::sync() {
  char token = 's';
  send(&token, 1);
  recv(&token, 1);
}

bool run_pair(const std::function<int(int, Channel&)>& body, const PeerSetup& setup0,
              const PeerSetup& setup1, std::chrono::seconds timeout) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw std::runtime_error("socketpair failed");
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int role = 0; role < 2; ++role) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::close(fds[1 - role]);
      Channel ch(fds[role]);
      const int rc = child_main([&] { return body(role, ch); }, role == 0 ? setup0 : setup1, timeout);
      std::fflush(nullptr);
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  ::close(fds[0]);
  ::close(fds[1]);
  return reap(pids, timeout);
}

bool run_isolated(const std::function<int()>& body, const PeerSetup& setup, std::chrono::seconds timeout) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int rc = child_main(body, setup, timeout);
    std::fflush(nullptr);
    ::_exit(rc);
  }
  return reap({pid}, timeout);
}

}  // namespace strata::plugin_test
