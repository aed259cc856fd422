#include "line_forwarder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace strata::tools {

namespace {

// Lines longer than this (or output without newlines, like progress bars) go out in pieces.
constexpr std::size_t kMaxPending = 64 * 1024;
constexpr std::size_t kMaxReadPerPump = 1024 * 1024;

}  // namespace

void write_fully(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

LineForwarder::LineForwarder(int fd, int dest, std::string prefix)
    : fd_(fd), dest_(dest), prefix_(std::move(prefix)) {
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

LineForwarder::LineForwarder(LineForwarder&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      dest_(other.dest_),
      prefix_(std::move(other.prefix_)),
      pending_(std::move(other.pending_)) {}

LineForwarder& LineForwarder::operator=(LineForwarder&& other) noexcept {
  if (this != &other) {
    close_pipe();
    fd_ = std::exchange(other.fd_, -1);
    dest_ = other.dest_;
    prefix_ = std::move(other.prefix_);
    pending_ = std::move(other.pending_);
  }
  return *this;
}

LineForwarder::~LineForwarder() { close_pipe(); }

void LineForwarder::close_pipe() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void LineForwarder::emit(std::string_view text) {
  std::string out = prefix_;
  out.append(text);
  write_fully(dest_, out.data(), out.size());
}

void LineForwarder::forward_lines(bool everything) {
  std::size_t start = 0;
  for (std::size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1)
    emit(std::string_view(pending_).substr(start, nl + 1 - start));
  pending_.erase(0, start);
  if (!pending_.empty() && (everything || pending_.size() > kMaxPending)) {
    // A tagged line must end before the next rank's tag starts.
    if (everything && !prefix_.empty()) pending_ += '\n';
    emit(pending_);
    pending_.clear();
  }
}

void LineForwarder::pump() {
  if (fd_ < 0) return;
  char buf[16384];
  bool eof = false;
  for (std::size_t total = 0; total < kMaxReadPerPump;) {
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n > 0) {
      pending_.append(buf, static_cast<std::size_t>(n));
      total += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    eof = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    break;
  }
  forward_lines(eof);
  if (eof) close_pipe();
}

void LineForwarder::finish() {
  pump();
  forward_lines(true);
  close_pipe();
}

}  // namespace strata::tools
