// What the WAN link knows of its paths: each busy stream's TCP_INFO read now and then,
// kept as the best delivery rate of the last few seconds (a rate measured while the
// stream had more to send than the path could take), its round trips and its
// retransmissions. The hierarchical pipeline sizes what it keeps in flight from it.
#include <algorithm>

#include "base/log.hpp"
#include "link/striping.hpp"
#include "wan/wan_transport.hpp"

namespace strata::wan {

namespace {
constexpr auto kSampleEvery = std::chrono::milliseconds(20);
// A rate older than this no longer says what the path gives now.
constexpr auto kRateWindow = std::chrono::seconds(10);
}  // namespace

void WanTransport::tune(int fd, bool latency) {
  net::PathTuning t = opt_.tuning;
  if (latency) {
    t.congestion = opt_.latency_congestion;
    t.fits_initial_window = true;
  }
  const std::string notes = net::tune_path(fd, t);
  if (!notes.empty() && !told_tuning_) {
    told_tuning_ = true;
    log::warn("WAN link streams: " + notes);
  }
}

void WanTransport::sample_paths(Clock::time_point now) {
  if (now - sampled_ < kSampleEvery) return;
  sampled_ = now;
  for (std::size_t p = 0; p < out_.size(); ++p) {
    auto& o = out_[p];
    for (auto& st : o.streams) {
      // Only streams with bytes on the way: an idle one's rate says what it was given.
      if (!st.connected || !st.sock || st.q.unacked_bytes() == 0) continue;
      const auto s = net::sample_tcp(st.sock->lowest_layer().native_handle());
      if (!s) continue;
      st.segs = s->data_segs_out;
      st.retrans = s->retrans_segs;
      st.srtt_s = s->srtt_s;
      st.min_rtt_s = s->min_rtt_s;
      st.busy_us = s->busy_us;
      if (!s->app_limited && s->delivery_bytes_per_s > 0 &&
          (s->delivery_bytes_per_s >= st.rate || now - st.rate_at > kRateWindow)) {
        st.rate = s->delivery_bytes_per_s;
        st.rate_at = now;
      }
    }
    choose_bulk_width(static_cast<int>(p), o, now);
  }
  const auto f = compute_path();
  {
    std::lock_guard<std::mutex> lock(path_mutex_);
    published_ = f;
  }
  if (told_buffers_) return;
  if (f.streams == 0) return;
  if (const std::string why = net::buffers_short(f.bdp_bytes() / f.streams); !why.empty()) {
    told_buffers_ = true;
    log::warn("WAN link streams: " + why);
  }
}

void WanTransport::choose_bulk_width(int peer, Outbound& o, Clock::time_point now) {
  const auto all = static_cast<std::size_t>(opt_.streams);
  const auto narrow = static_cast<std::size_t>(std::max(opt_.narrow_streams, 0));
  if (narrow == 0 || narrow >= all) return;
  const Lane l = lane(o, kBulk);
  double rate = 0;
  for (std::size_t s = l.begin; s < l.end; ++s) {
    const auto& st = o.streams[s];
    // Every stream of the lane busy lately, or the sum says less than the path gives; and
    // busy long enough since the width last changed to have found its share (the probe's
    // few round trips leave BBR in its start-up at a few Mbit/s).
    if (st.rate <= 0 || now - st.rate_at > kRateWindow) return;
    const auto settle_us = static_cast<std::uint64_t>(std::max(0.5, 20 * st.srtt_s) * 1e6);
    if (st.busy_us < st.busy_at_width + settle_us) return;
    rate += st.rate;
  }
  const std::size_t width = l.end - l.begin;
  const std::size_t next = link::next_bulk_width(width, all, narrow, opt_.narrow_above, rate);
  if (next == width) return;
  o.bulk_width = next;
  for (std::size_t s = 0; s < all; ++s) o.streams[s].busy_at_width = o.streams[s].busy_us;
  log::info("WAN link to rank " + std::to_string(peer) + ": " + std::to_string(next) + " of " +
             std::to_string(all) + " bulk streams (they carried " +
             std::to_string(std::llround(rate * 8 / 1e6)) + " Mbit/s)");
}

transport::PathFigures WanTransport::path() const {
  std::lock_guard<std::mutex> lock(path_mutex_);
  return published_;
}

transport::PathFigures WanTransport::compute_path() const {
  transport::PathFigures best;
  const auto now = Clock::now();
  for (std::size_t p = 0; p < out_.size(); ++p) {
    if (static_cast<int>(p) == rank_) continue;
    const auto& o = out_[p];
    transport::PathFigures f;
    std::uint64_t segs = 0, retrans = 0;
    double kernel_rtt = 0;  // the kernels' shortest round trip, when the link has none of its own
    for (const auto& st : o.streams) {
      if (st.min_rtt_s > 0) kernel_rtt = kernel_rtt == 0 ? st.min_rtt_s : std::min(kernel_rtt, st.min_rtt_s);
      segs += st.segs;
      retrans += st.retrans;
      f.srtt_s = std::max(f.srtt_s, st.srtt_s);
      if (st.rate > 0 && now - st.rate_at <= kRateWindow) {
        f.rate_bytes_per_s += st.rate;
        ++f.streams;
      }
    }
    if (o.min_rtt.count() == 0 && kernel_rtt == 0) continue;
    // The link's own (frame written to its acknowledgement) also counts the peer's turn;
    // the kernel's sees the path alone. The shorter of the two.
    f.rtt_s = std::chrono::duration<double>(o.min_rtt).count();
    if (kernel_rtt > 0 && (f.rtt_s == 0 || kernel_rtt < f.rtt_s)) f.rtt_s = kernel_rtt;
    f.loss = segs ? double(retrans) / double(segs) : 0;
    if (best.rtt_s == 0 || f.bdp_bytes() > best.bdp_bytes() ||
        (f.bdp_bytes() == best.bdp_bytes() && f.rtt_s > best.rtt_s))
      best = f;
  }
  return best;
}

}  // namespace strata::wan
