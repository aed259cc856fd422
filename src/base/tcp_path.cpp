#include "base/tcp_path.hpp"

#include <linux/tcp.h>  // the kernel's tcp_info (glibc's lacks the delivery-rate fields)
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>

namespace strata::net {

namespace {

constexpr int kRtoMinUs = 45;  // TCP_RTO_MIN_US, Linux 6.15; older headers lack it

std::string read_line(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::uint64_t third_field(const char* path) {
  std::istringstream in(read_line(path));
  std::uint64_t a = 0, b = 0, c = 0;
  in >> a >> b >> c;
  return in ? c : 0;
}

void add(std::string& to, const std::string& what) { to += (to.empty() ? "" : "; ") + what; }

}  // namespace

std::string tune_path(int fd, const PathTuning& t) {
  std::string notes;
  if (!t.congestion.empty() &&
      ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, t.congestion.data(), static_cast<socklen_t>(t.congestion.size())) != 0)
    add(notes, "congestion control '" + t.congestion + "' " +
                   (errno == ENOENT ? "is not available in this kernel (net.ipv4.tcp_available_congestion_control: " +
                                          read_line("/proc/sys/net/ipv4/tcp_available_congestion_control") + ")"
                                    : "is not allowed for this process (net.ipv4.tcp_allowed_congestion_control: " +
                                          read_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control") + ")") +
                   ", so the kernel's default runs, which loss slows far more (STRATA_WAN_CONGESTION)");
  char cc[16] = {};
  socklen_t len = sizeof cc;
  // BBR keeps its rate across idle time; the others fall back to their initial window.
  if (!t.fits_initial_window && ::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &len) == 0 &&
      std::strncmp(cc, "bbr", 3) != 0 &&
      read_line("/proc/sys/net/ipv4/tcp_slow_start_after_idle") == "1")
    add(notes, std::string("'") + cc +
                   "' with net.ipv4.tcp_slow_start_after_idle=1 starts over from its initial window whenever "
                   "the link idles between calls for a round trip; set that sysctl to 0");
  if (t.rto_min.count() > 0) {
    const int us = static_cast<int>(t.rto_min.count());
    ::setsockopt(fd, IPPROTO_TCP, kRtoMinUs, &us, sizeof us);  // older kernels: the 200 ms floor stays
  }
  if (t.buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &t.buffer, sizeof t.buffer);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &t.buffer, sizeof t.buffer);
    int got = 0;
    socklen_t n = sizeof got;
    // The kernel doubles what it grants (for its own overhead) and caps it at *mem_max.
    if (::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &n) == 0 && got < t.buffer)
      add(notes, "asked for " + std::to_string(t.buffer) + "-byte socket buffers (STRATA_WAN_SOCKET_BUFFER) and got " +
                     std::to_string(got / 2) +
                     ": net.core.rmem_max and net.core.wmem_max cap them; raise those, or leave "
                     "STRATA_WAN_SOCKET_BUFFER at 0 for the kernel's autotuning (net.ipv4.tcp_rmem/tcp_wmem)");
  }
  return notes;
}

std::optional<TcpSample> sample_tcp(int fd) {
  tcp_info i{};
  socklen_t len = sizeof i;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &i, &len) != 0) return std::nullopt;
  TcpSample s;
  s.srtt_s = i.tcpi_rtt * 1e-6;
  s.min_rtt_s = i.tcpi_min_rtt * 1e-6;
  s.delivery_bytes_per_s = static_cast<double>(i.tcpi_delivery_rate);
  s.app_limited = i.tcpi_delivery_rate_app_limited != 0;
  s.data_segs_out = i.tcpi_data_segs_out;
  s.retrans_segs = i.tcpi_total_retrans;
  s.busy_us = i.tcpi_busy_time;
  s.rwnd_limited_us = i.tcpi_rwnd_limited;
  s.sndbuf_limited_us = i.tcpi_sndbuf_limited;
  // An older kernel fills less of the structure.
  s.snd_wnd = len >= offsetof(tcp_info, tcpi_snd_wnd) + sizeof i.tcpi_snd_wnd ? i.tcpi_snd_wnd : 0;
  char cc[16] = {};
  socklen_t n = sizeof cc;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &n) == 0) s.congestion.assign(cc, strnlen(cc, sizeof cc));
  return s;
}

std::uint64_t autotune_receive_max() { return third_field("/proc/sys/net/ipv4/tcp_rmem"); }
std::uint64_t autotune_send_max() { return third_field("/proc/sys/net/ipv4/tcp_wmem"); }

std::string buffers_short(double bytes_per_stream) {
  // A stream needs its share of the path's bytes in flight in its send buffer and, with
  // the kernel's overhead and room to refill a loss, about twice that in its receive
  // buffer.
  const double need = 2 * bytes_per_stream;
  const std::uint64_t r = autotune_receive_max(), w = autotune_send_max();
  std::string which;
  if (r && need > double(r)) which = "net.ipv4.tcp_rmem (its third field, " + std::to_string(r) + ")";
  if (w && bytes_per_stream > double(w))
    which += std::string(which.empty() ? "" : " and ") + "net.ipv4.tcp_wmem (" + std::to_string(w) + ")";
  if (which.empty()) return "";
  return "the path holds about " + std::to_string(std::llround(bytes_per_stream)) +
         " bytes in flight per stream, more than autotuning may buffer; raise " + which +
         " on both ends, or run more streams (STRATA_WAN_STREAMS)";
}

}  // namespace strata::net
