// Forwarding of a child's output pipe to one of our own descriptors, a whole line at a
// time, so that lines from different ranks never interleave mid-line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strata::tools {

// Writes all of data to fd, retrying after signals. Output is dropped, not reported,
// when the reader has gone away: the supervisor must keep running regardless.
void write_fully(int fd, const void* data, std::size_t n);

class LineForwarder {
 public:
  LineForwarder() = default;
  // Takes ownership of fd and makes it non-blocking; every forwarded line starts with prefix.
  LineForwarder(int fd, int dest, std::string prefix);
  LineForwarder(LineForwarder&& other) noexcept;
  LineForwarder& operator=(LineForwarder&& other) noexcept;
  LineForwarder(const LineForwarder&) = delete;
  LineForwarder& operator=(const LineForwarder&) = delete;
  ~LineForwarder();

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // Reads what is available (a bounded amount, so one chatty rank cannot starve the
  // others) and forwards the complete lines; closes the pipe at end of file.
  void pump();
  // Takes what is available, forwards everything buffered (a partial last line too), and
  // closes the pipe even if some other process still holds its write end.
  void finish();

 private:
  void forward_lines(bool everything);
  void emit(std::string_view text);
  void close_pipe();

  int fd_ = -1;
  int dest_ = 1;
  std::string prefix_;
  std::string pending_;
};

}  // namespace strata::tools
