// The WAN link's shape (STRATA_WAN_* and STRATA_UNEXPECTED_BYTES, resolved by
// core/link_settings for libstrata's link and the NCCL plugin alike).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "base/socket_settings.hpp"
#include "base/tcp_path.hpp"
#include "bootstrap/job_secret.hpp"
#include "wan/emulation.hpp"
#include "wan/tls.hpp"

namespace strata::wan {

inline constexpr int kMaxStreams = 64;

struct WanOptions {
  net::SocketSettings sockets;  // where it listens, the handshake's deadline
  int streams = 4;  // bulk streams: every message beyond the latency lane's
  // A peer's bulk bytes start on only `narrow_streams` of them (the rest stay dialled and
  // idle), go to all `streams` once those carry less than `narrow_above` / 2 bytes/s
  // together, and back to `narrow_streams` once all carry at least `narrow_above`.
  // 0: every bulk stream, always.
  int narrow_streams = 0;
  double narrow_above = 0;
  // Streams of their own for latency-bound messages (up to latency_bytes()), after the
  // bulk ones, under CUBIC: a small message must not queue behind a bulk stripe in a
  // socket buffer, nor be paced by a BBR that has only seen small messages (it stays in
  // its start-up, pacing a 160 ms path at ~4 Mbit/s: a 16 KiB allreduce across three
  // regions took 1.16-1.44x the slowest one-way delay, 1.02-1.04x unpaced).
  int latency_streams = 2;
  std::string latency_congestion = "cubic";
  std::size_t stripe_bytes = 512u << 10;
  net::PathTuning tuning;  // congestion control, retransmission floor, buffers of every stream
  std::size_t window = 64u << 20;  // unacknowledged bytes per stream (emulation may lower)
  std::chrono::milliseconds reconnect_for{std::chrono::seconds(60)};  // then the peer fails
  // STRATA_KEEPALIVE_S: kernel keepalive on idle streams, so middleboxes keep their flows.
  std::chrono::milliseconds keepalive{std::chrono::seconds(15)};
  // A stream whose sent bytes stay unacknowledged this long is broken and redialled: a
  // flow a middlebox forgot and now drops silently would otherwise stall for minutes.
  std::chrono::milliseconds stall{std::chrono::seconds(5)};
  // Per peer: sends copied and completed at once, their bytes kept until acknowledged
  // (STRATA_WAN_SEND_BUFFER). A send that does not fit completes on its acknowledgement.
  std::size_t send_buffer = 32u << 20;
  // Staging memory for messages that arrive before their receive, all peers together; a
  // message that does not fit stalls its stream until its receive is posted.
  std::size_t unexpected_bytes = std::size_t{1} << 30;
  Emulation emulation;
  // Streams prove they belong to the job with its secret; with tls.on they also run
  // inside TLS 1.3 (keyed by certificates, else by the secret).
  bootstrap::JobSecret secret;
  TlsSettings tls;

  int all_streams() const { return streams + latency_streams; }
  // The largest message on the latency lane: what every latency stream sends in its first
  // flight even after an idle restart (10 segments), with room for the frame headers.
  std::size_t latency_bytes() const { return static_cast<std::size_t>(latency_streams) * (12u << 10); }
};

}  // namespace strata::wan
