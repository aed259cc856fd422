// A long-distance TCP stream's set-up and what its kernel knows of the path, for the WAN
// link and the NCCL plugin's striped connections alike.
//
// Set-up (before connect, and on accepted sockets): a congestion control that does not
// read loss as congestion (BBR where the kernel has it: one random loss in a hundred
// leaves a 50 ms path's CUBIC stream at a few Mbit/s), a floor under the retransmission
// timer near the path's own round trip instead of the kernel's 200 ms (a stripe whose
// last packet and its retransmission are lost otherwise stalls its message for 0.2 s
// and more), and buffers left to the kernel's autotuning unless a size is asked for: a
// fixed SO_RCVBUF both turns autotuning off and is capped by net.core.rmem_max.
//
// Reading: TCP_INFO's smoothed and minimum round trip, delivery rate (and whether the
// sample was limited by the application), retransmissions and the peer's window.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace strata::net {

struct PathTuning {
  std::string congestion = "bbr";              // TCP_CONGESTION; "" keeps the kernel's default
  std::chrono::microseconds rto_min{10000};    // TCP_RTO_MIN_US (Linux 6.15+); 0 keeps the kernel's
  int buffer = 0;                              // SO_SNDBUF and SO_RCVBUF; 0: the kernel's autotuning
  // Its messages fit the initial window (the WAN link's latency lane): a window that
  // restarts after idle costs them nothing, so that is not worth a warning.
  bool fits_initial_window = false;
};

// Applies `t` to a TCP socket, best effort: what the kernel refuses stays as it was.
// Returns "" or what it could not do, naming the setting or sysctl that decides it (a
// congestion control not available or not allowed, a buffer capped, a window that idling
// resets), for the caller to tell once: a job opens many streams, all refused alike.
std::string tune_path(int fd, const PathTuning& t);

struct TcpSample {
  double srtt_s = 0, min_rtt_s = 0;
  double delivery_bytes_per_s = 0;
  bool app_limited = true;         // the delivery rate was limited by what was sent
  std::uint64_t data_segs_out = 0, retrans_segs = 0;  // since the connection began
  std::uint32_t snd_wnd = 0;       // the peer's advertised window, bytes (0: unknown)
  std::uint64_t busy_us = 0, rwnd_limited_us = 0, sndbuf_limited_us = 0;
  std::string congestion;          // the congestion control in use
};
std::optional<TcpSample> sample_tcp(int fd);

// The kernel's autotuning limits (tcp_rmem[2], tcp_wmem[2]) of this process's network
// namespace, 0 where unreadable.
std::uint64_t autotune_receive_max();
std::uint64_t autotune_send_max();

// "" or, when `bytes` in flight per stream (a path's bandwidth-delay product over its
// streams) exceeds what autotuning may give a stream, a sentence naming the sysctl.
std::string buffers_short(double bytes_per_stream);

}  // namespace strata::net
