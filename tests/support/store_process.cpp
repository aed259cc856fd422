#include "store_process.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace strata::test {

namespace {

bool read_all(int fd, char* into, std::size_t n) {
  while (n > 0) {
    const ssize_t got = ::read(fd, into, n);
    if (got <= 0) return false;
    into += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace

StoreProcess::StoreProcess() {
  int id_pipe[2], alive_pipe[2];
  if (::pipe(id_pipe) != 0 || ::pipe(alive_pipe) != 0) throw std::runtime_error("StoreProcess: pipe failed");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("StoreProcess: fork failed");
  if (pid_ == 0) {
    ::close(id_pipe[0]);
    ::close(alive_pipe[1]);
    int code = 0;
    try {
      const UniqueId id = UniqueId::create();
      code = ::write(id_pipe[1], id.bytes.data(), id.bytes.size()) == static_cast<ssize_t>(id.bytes.size()) ? 0 : 1;
      ::close(id_pipe[1]);
      char c;
      while (::read(alive_pipe[0], &c, 1) > 0) {
      }
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  ::close(id_pipe[1]);
  ::close(alive_pipe[0]);
  keep_alive_ = alive_pipe[1];
  const bool ok = read_all(id_pipe[0], id_.bytes.data(), id_.bytes.size());
  ::close(id_pipe[0]);
  if (!ok) {
    stop();
    throw std::runtime_error("StoreProcess: the store process did not send its id");
  }
}

StoreProcess::~StoreProcess() { stop(); }

void StoreProcess::stop() {
  if (keep_alive_ >= 0) ::close(keep_alive_);
  keep_alive_ = -1;
  if (pid_ <= 0) return;
  // It exits once the pipe closes; one stuck past five seconds is killed.
  bool reaped = false;
  for (int i = 0; i < 100 && !reaped; ++i) {
    reaped = ::waitpid(pid_, nullptr, WNOHANG) == pid_;
    if (!reaped) ::usleep(50 * 1000);
  }
  if (!reaped) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
}

strataUniqueId StoreProcess::c_id() const {
  strataUniqueId c{};
  static_assert(sizeof c.internal == sizeof id_.bytes);
  std::memcpy(c.internal, id_.bytes.data(), sizeof c.internal);
  return c;
}

}  // namespace strata::test
