// The communicator's side of online tuning (topology/tuner.hpp): gathering the ranks'
// timings of a size's exploration on one clock, and reading what was learned.
#include "core/comm_impl.hpp"

#include <algorithm>

namespace strata::detail {

using transport::Clock;

std::vector<double> CommImpl::agree_on_times(std::uint64_t seq, CollectiveKind kind, std::uint64_t bytes,
                                             const std::vector<double>& mine, Clock::time_point deadline) {
  const auto tag = transport::collective_tag(seq, transport::Channel::tune);
  auto wait = [&](const transport::RequestPtr& r, int peer) {
    if (!transport::wait(*transport_, r, deadline))
      throw TimeoutError("tuning on rank " + std::to_string(rank_) + ": rank " + std::to_string(peer) +
                         " did not answer in time");
    if (!r->error().empty()) throw TransportError(r->error());
  };
  auto received = [&](const transport::RequestPtr& r, int peer, std::size_t want) {
    wait(r, peer);
    if (r->bytes() != want)
      throw TransportError("tuning on rank " + std::to_string(rank_) + ": rank " + std::to_string(peer) + " sent " +
                           std::to_string(r->bytes()) + " bytes, not " + std::to_string(want));
  };
  // Ranks of one host read one clock (steady_clock is the kernel's monotonic clock);
  // others answer rank 0's pings with theirs, and the quickest of three round trips
  // places it, within half that round trip.
  const bool one_clock = world_.shared_memory;
  constexpr int kPings = 3;
  std::vector<double> agreed(tuner_->candidates(kind, bytes));
  const std::size_t answer = agreed.size() * sizeof(double), stamps = mine.size() * sizeof(double);
  if (rank_ != 0) {
    for (int i = 0; !one_clock && i < kPings; ++i) {
      double ping = 0;
      received(transport_->irecv(0, tag, &ping, sizeof ping), 0, sizeof ping);
      const double now = clock_seconds(Clock::now());
      wait(transport_->isend(0, tag, &now, sizeof now), 0);
    }
    auto r = transport_->irecv(0, tag, agreed.data(), answer);
    wait(transport_->isend(0, tag, mine.data(), stamps), 0);
    received(r, 0, answer);
    return agreed;
  }
  std::vector<std::vector<double>> offers(static_cast<std::size_t>(size_), std::vector<double>(mine.size()));
  offers[0] = mine;
  for (int r = 1; r < size_; ++r) {
    double offset = 0, best_trip = 0;
    for (int i = 0; !one_clock && i < kPings; ++i) {
      double theirs = 0;
      auto reply = transport_->irecv(r, tag, &theirs, sizeof theirs);
      const double sent = clock_seconds(Clock::now());
      wait(transport_->isend(r, tag, &sent, sizeof sent), r);
      received(reply, r, sizeof theirs);
      const double back = clock_seconds(Clock::now());
      if (i == 0 || back - sent < best_trip) {
        best_trip = back - sent;
        offset = theirs - (sent + back) / 2;
      }
    }
    auto& theirs = offers[static_cast<std::size_t>(r)];
    received(transport_->irecv(r, tag, theirs.data(), stamps), r, stamps);
    for (double& t : theirs) t -= offset;
  }
  agreed = tuner_->judge(kind, bytes, offers);
  if (log::enabled(log::Level::trace)) {
    std::string line = "tuning " + std::string(to_string(kind)) + " of " + std::to_string(bytes) + " bytes, us per call:";
    for (const auto& calls : tuner_->call_times(kind, bytes, offers)) {
      line += " |";
      for (double t : calls) line += " " + std::to_string(static_cast<long long>(t * 1e7 + 0.5) / 10.0).substr(0, 6);
    }
    log::trace(line);
  }
  std::vector<transport::RequestPtr> sends;
  for (int r = 1; r < size_; ++r) sends.push_back(transport_->isend(r, tag, agreed.data(), answer));
  for (int r = 1; r < size_; ++r) wait(sends[static_cast<std::size_t>(r - 1)], r);
  return agreed;
}

std::string CommImpl::tuning_report() {
  check_usable();
  std::string out;
  auto work = engine_->submit([&]() -> std::optional<Pending> {
    if (tuner_) out = tuner_->report();
    return std::nullopt;
  });
  Work(work).wait();
  return out;
}

}  // namespace strata::detail
